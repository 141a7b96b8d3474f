//! The experiment routes in the OpenAPI document, one set per platform.
//!
//! One handler serves `/experiments/{platform}/...` for every platform;
//! the document lists `/experiments/backend/start`, `/experiments/android/start`
//! and so on concretely, each with its own request and response schemas, so
//! that a generated client gets real types. The schemas also carry what the
//! request checks enforce before anything else (lengths, ranges, required
//! fields, the host's duration limits); what depends on the host's state
//! (which fault types are loaded, a fault's own intensity range and
//! parameters, which targets exist) is answered with 422 and documented
//! there.

use serde_json::{Map, Value, json};

use super::body::{ANDROID_FIELDS, FRONTEND_FIELDS};
use crate::api::Limits;
use crate::api::openapi::NOT_BLANK;
use crate::engine::guardrails::MAX_CONDITIONS;
use crate::platforms::probes::MAX_PROBES;

const PLATFORMS: [Platform; 3] = [
    Platform {
        name: "backend",
        title: "Backend",
        targets: "Container names, or `key=value` label selectors joined by commas that must all hold (`app=shop,tier=web`); \
                  the targets are every running container any entry matches.",
        note: "",
        example: r#"{"fault_type": "cpu_stress", "targets": ["app=shop"], "duration": 60, "intensity": 50}"#,
    },
    Platform {
        name: "frontend",
        title: "Frontend",
        targets: "Origins (`http://127.0.0.1:8080`: the whole site) or URLs whose path is a route pattern \
                  (`http://127.0.0.1:8080/api/*`, `*` matching any run of characters). Every site must answer.",
        note: "The start answers, in `resources`, the proxy listener opened for each site: load the app through \
               its `address` (proxy mode), or have the page register the service worker (service_worker mode).",
        example: r#"{"fault_type": "http_latency", "targets": ["http://127.0.0.1:8080"], "duration_seconds": 60,
            "intensity": 300, "mode": "proxy", "routes": [{"path": "/api/*", "methods": ["GET"]}]}"#,
    },
    Platform {
        name: "android",
        title: "Android",
        targets: "The package names of the apps under test.",
        note: "The experiment runs on an emulator the host launches (`--emulator`) or on a device connected to its adb server; \
               the start installs the uploaded APK (`apk`, from POST /upload/apk) and starts the app, and answers its `package`.",
        example: r#"{"fault_type": "kill_app", "targets": ["com.example.shop"], "target_type": "android",
            "observation_type": "android", "duration_seconds": 60, "apk": "shop-1.4.2",
            "android_run": {"avd_name": "Pixel_6_API_34", "headless": true, "reset_app_state": true},
            "scenarios": [{"type": "foreground_app", "at": 10, "duration_seconds": 5}],
            "expected": {"running": true, "not_crash": true, "not_anr": true, "should_recover": true}}"#,
    },
];

struct Platform {
    name: &'static str,
    title: &'static str,
    targets: &'static str,
    /// Added to every description of the platform's routes.
    note: &'static str,
    example: &'static str,
}

/// The routes, and the schemas each platform has its own copy of.
const ROUTES: [&str; 5] = ["start", "preview", "status", "metrics", "stop"];
const SCHEMAS: [&str; 5] = ["StartRequest", "Started", "PlanSummary", "Status", "Metrics"];
/// What only an Android start answers: the app's package and its device.
const ANDROID_ONLY: [&str; 2] = ["package", "device"];
/// What only the backend knows: how far a fault on the targets reaches.
const DEPENDENCY_FIELDS: [&str; 4] = ["dependencies", "dependents", "blast_radius", "cascade_depth"];

fn schema_ref(name: &str) -> String {
    format!("#/components/schemas/{name}")
}

/// Replaces the generic `{platform}` routes and schemas with one set per platform.
pub fn per_platform(doc: &mut Value, limits: &Limits) {
    constrain_requests(&mut doc["components"]["schemas"], limits);
    let Some(paths) = doc["paths"].as_object_mut() else { return };
    for route in ROUTES {
        let Some(generic) = paths.remove(&format!("/experiments/{{platform}}/{route}")) else { continue };
        for platform in &PLATFORMS {
            let mut item = generic.clone();
            rename_refs(&mut item, platform);
            for (_, op) in item.as_object_mut().into_iter().flatten() {
                let Some(op) = op.as_object_mut() else { continue };
                concrete_operation(op, route, platform);
            }
            paths.insert(format!("/experiments/{}/{route}", platform.name), item);
        }
    }
    let Some(schemas) = doc["components"]["schemas"].as_object_mut() else { return };
    let generic: Vec<Value> = SCHEMAS.iter().map(|name| schemas.remove(*name).unwrap_or_default()).collect();
    let android_fields = schemas.remove("AndroidOptions").unwrap_or_default();
    let frontend_fields = schemas.remove("FrontendOptions").unwrap_or_default();
    for platform in &PLATFORMS {
        for (name, schema) in SCHEMAS.iter().zip(&generic) {
            let mut schema = schema.clone();
            rename_refs(&mut schema, platform);
            match *name {
                "StartRequest" => start_request(&mut schema, platform, &android_fields, &frontend_fields),
                "PlanSummary" => {
                    if platform.name != "backend" {
                        for field in DEPENDENCY_FIELDS {
                            remove_property(&mut schema, field);
                        }
                    }
                    if platform.name != "android" {
                        for field in ANDROID_ONLY {
                            remove_property(&mut schema, field);
                        }
                    }
                }
                "Status" | "Metrics" => {
                    if platform.name != "android" {
                        remove_property(&mut schema, "android");
                    }
                    if *name == "Status" && platform.name != "backend" {
                        schema["properties"]["impact"]["description"] = json!("Always null: only the backend computes dependencies.");
                    }
                }
                _ => {}
            }
            schemas.insert(format!("{}{name}", platform.title), schema);
        }
    }
}

/// Points every reference to a generic experiment schema at the platform's own.
fn rename_refs(value: &mut Value, platform: &Platform) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(target)) = map.get_mut("$ref")
                && let Some(name) = SCHEMAS.iter().find(|name| *target == schema_ref(name))
            {
                *target = schema_ref(&format!("{}{name}", platform.title));
            }
            map.values_mut().for_each(|v| rename_refs(v, platform));
        }
        Value::Array(items) => items.iter_mut().for_each(|v| rename_refs(v, platform)),
        _ => {}
    }
}

fn remove_property(schema: &mut Value, field: &str) {
    if let Some(properties) = schema["properties"].as_object_mut() {
        properties.remove(field);
    }
    if let Some(required) = schema["required"].as_array_mut() {
        required.retain(|r| r != field);
    }
}

fn concrete_operation(op: &mut Map<String, Value>, route: &str, platform: &Platform) {
    if let Some(params) = op.get_mut("parameters").and_then(Value::as_array_mut) {
        params.retain(|p| p["name"] != "platform");
        if params.is_empty() {
            op.remove("parameters");
        }
    }
    op.insert("operationId".into(), json!(format!("{route}_{}", platform.name)));
    op.insert("tags".into(), json!([format!("experiments: {}", platform.name)]));
    if !platform.note.is_empty() {
        let described = op.get("description").and_then(Value::as_str).unwrap_or_default();
        let note = if described.is_empty() { platform.note.to_string() } else { format!("{described}\n\n{}", platform.note) };
        op.insert("description".into(), json!(note));
    }
    if let Some(content) = op.get_mut("requestBody").and_then(|b| b["content"].get_mut("application/json")) {
        content["example"] = serde_json::from_str(platform.example).expect("the example is JSON");
    }
    if route == "start"
        && let Some(created) = op.get_mut("responses").and_then(|r| r.get_mut("201"))
    {
        created["headers"] = json!({
            "Location": { "description": "The experiment's status route.", "schema": { "type": "string" } },
            "Idempotent-Replayed": {
                "description": "`true` when this answer repeats the one to an earlier request with the same `Idempotency-Key`.",
                "schema": { "type": "string", "enum": ["true"] }
            }
        });
        let link = |verb: &str, what: &str| {
            json!({
                "operationId": format!("{verb}_{}", platform.name),
                "parameters": { "id": "$response.body#/id" },
                "description": what,
            })
        };
        created["links"] = json!({
            "status": link("status", "The experiment just started: its state, phase and timeline."),
            "metrics": link("metrics", "The experiment's observations so far."),
            "stop": link("stop", "Stops the experiment just started."),
        });
    }
}

/// The request schema of a platform: the common fields, and the
/// platform's own (Android's, the frontend's).
fn start_request(schema: &mut Value, platform: &Platform, android_fields: &Value, frontend_fields: &Value) {
    schema["description"] = json!(format!("A start (or preview) of a {} experiment.", platform.title));
    schema["properties"]["targets"]["description"] = json!(platform.targets);
    if platform.name == "frontend"
        && let (Some(own), Some(properties)) = (frontend_fields["properties"].as_object(), schema["properties"].as_object_mut())
    {
        for field in FRONTEND_FIELDS {
            if let Some(property) = own.get(field) {
                properties.insert(field.into(), property.clone());
            }
        }
        properties["routes"]["maxItems"] = json!(crate::platforms::frontend::options::MAX_ROUTES);
        return;
    }
    if platform.name != "android" {
        return;
    }
    let (Some(own), Some(properties)) = (android_fields["properties"].as_object(), schema["properties"].as_object_mut()) else {
        return;
    };
    for field in ANDROID_FIELDS {
        if let Some(property) = own.get(field) {
            properties.insert(field.into(), property.clone());
        }
    }
    properties["apk"]["pattern"] = json!(NOT_BLANK);
}

fn bounds(property: &mut Value, minimum: Option<f64>, maximum: Option<f64>) {
    let number = |n: f64| if n.fract() == 0.0 { json!(n as i64) } else { json!(n) };
    if let Some(min) = minimum {
        property["minimum"] = number(min);
    }
    if let Some(max) = maximum {
        property["maximum"] = number(max);
    }
}

/// What the request checks enforce whatever the fault and the host's state.
fn constrain_requests(schemas: &mut Value, limits: &Limits) {
    let (min, max) = (limits.min_duration.as_secs_f64().ceil(), limits.max_duration.as_secs_f64().floor());
    let start = &mut schemas["StartRequest"];
    start["required"] = json!(["fault_type", "targets"]);
    // A duration, in either spelling, or the phases' lengths.
    start["anyOf"] = json!(["duration", "duration_seconds", "phases"]
        .map(|field| json!({ "required": [field], "properties": { field: { "not": { "type": "null" } } } })));
    let p = &mut start["properties"];
    p["fault_type"]["minLength"] = json!(1);
    p["targets"]["minItems"] = json!(1);
    p["targets"]["items"]["pattern"] = json!(NOT_BLANK);
    for field in ["duration", "duration_seconds"] {
        bounds(&mut p[field], Some(min), Some(max));
    }
    bounds(&mut p["tolerance"], Some(0.0), Some(1.0));
    p["probes"]["maxItems"] = json!(MAX_PROBES);

    let phases = &mut schemas["PhasesRequest"]["properties"];
    for field in ["baseline_seconds", "recovering_seconds"] {
        bounds(&mut phases[field], Some(0.0), Some(max));
    }
    phases["injecting_seconds"]["exclusiveMinimum"] = json!(0);
    phases["injecting_seconds"]["maximum"] = json!(max);

    // Probes: each kind takes only its own fields; timeouts are 1 to 30 000 ms.
    for variant in schemas["Probe"]["oneOf"].as_array_mut().into_iter().flatten() {
        variant["additionalProperties"] = json!(false);
        bounds(&mut variant["properties"]["timeout_ms"], Some(1.0), Some(30_000.0));
        bounds(&mut variant["properties"]["max_latency_ms"], Some(1.0), Some(30_000.0));
        if variant["properties"]["expect_status"].is_object() {
            bounds(&mut variant["properties"]["expect_status"], Some(0.0), Some(f64::from(u16::MAX)));
        }
        for text in ["url", "address"] {
            if variant["properties"][text].is_object() {
                variant["properties"][text]["minLength"] = json!(1);
            }
        }
    }

    let guardrails = &mut schemas["Guardrails"]["properties"];
    guardrails["max_targets"]["minimum"] = json!(1);
    guardrails["abort_when"]["maxItems"] = json!(MAX_CONDITIONS);
    let condition = &mut schemas["AbortCondition"]["properties"];
    bounds(&mut condition["for_seconds"], Some(0.0), Some(3600.0));
    bounds(&mut condition["below"], Some(0.0), Some(1.0));
    condition["above"]["exclusiveMinimum"] = json!(0);
}
