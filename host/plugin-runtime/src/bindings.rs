//! Host bindings for `faultline:plugin@0.1.0`. A later contract version gets
//! a module of its own beside this one, so old plugins keep loading.

wasmtime::component::bindgen!({
    path: "../../wit/since_v0.1.0",
    world: "fault-driver",
    imports: { default: async | trappable },
    exports: { default: async },
});

pub use faultline::plugin::types;
