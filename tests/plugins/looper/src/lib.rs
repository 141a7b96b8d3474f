//! Hostile test plugin: loops forever (the host's deadline must stop it).

test_plugin_kit::hostile_plugin!("test_looper", "Loops forever", |target| {
    loop {
        std::hint::black_box(target);
    }
});
