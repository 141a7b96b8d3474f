//! Hostile test plugin: grows memory without bound (the host's cap must stop it).

test_plugin_kit::hostile_plugin!("test_hog", "Grows memory without bound", |target| {
    let mut hoard: Vec<Vec<u8>> = vec![];
    loop {
        hoard.push(vec![1; 1 << 20]);
        std::hint::black_box((&hoard, target));
    }
});
