//! Hostile test plugin: calls the docker capability, which a host grants it
//! only when told to; it must be refused at load otherwise.

test_plugin_kit::hostile_plugin!("test_overreach", "Calls the docker capability", |target| {
    faultline_sdk::docker::find(&[target.name.clone()])?;
});
