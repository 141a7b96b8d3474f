// The bindings are generated from wit/: rebuild when the contract changes.
fn main() {
    println!("cargo:rerun-if-changed=../../wit");
}
