//! Hostile test plugin: traps (a panic becomes a wasm trap).

test_plugin_kit::hostile_plugin!("test_trapper", "Traps (panics)", |target| {
    panic!("test_trapper traps on {}", target.name);
});
