//! The served OpenAPI document: what the handlers' annotations declare,
//! finished here in one place so that no route has to repeat it:
//!
//! - every error response is `application/problem+json` with the `Problem`
//!   schema; the annotations only name the statuses and their codes;
//! - the refusals every route of a kind shares are added to each of them:
//!   401 and 500 wherever a key is needed, 400/413/415/422 wherever a JSON
//!   body is read, 400 `invalid_path` wherever the path has a parameter;
//! - the experiment routes are listed per platform (`experiments::doc`),
//!   with the host's own duration limits;
//! - links tie what a POST creates to the routes that read it, for clients
//!   and for stateful testing.

use serde_json::{Map, Value, json};

use super::Limits;

/// The schema every error response carries.
const PROBLEM: &str = "#/components/schemas/Problem";

/// A string holding at least one character that is not whitespace (Unicode
/// White_Space, as Rust's `str::trim` removes it), spelled out so that
/// every regex dialect agrees on it.
pub const NOT_BLANK: &str = "[^\\t-\\r \\u0085\\u00A0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000]";

/// The document as served.
pub fn finish(doc: utoipa::openapi::OpenApi, limits: &Limits) -> Value {
    let mut doc = serde_json::to_value(doc).expect("the OpenAPI document serializes");
    super::experiments::doc::per_platform(&mut doc, limits);
    link_keys(&mut doc);
    link_plugins(&mut doc);
    link_emergency_stop(&mut doc);
    shared_refusals(&mut doc);
    problems(&mut doc);
    parameters_are_never_null(&mut doc);
    optional_bodies_are_left_out_not_null(&mut doc);
    doc
}

/// An optional JSON body (`Option<T>` in an annotation) is one that may be
/// left out; a JSON `null` is refused like any other value of the wrong shape.
fn optional_bodies_are_left_out_not_null(doc: &mut Value) {
    for (_, op) in operations(doc) {
        let Some(content) = op.get_mut("requestBody").and_then(|b| b["content"].get_mut("application/json")) else { continue };
        let schema = &mut content["schema"];
        if let Some([null, body]) = schema["oneOf"].as_array().map(Vec::as_slice)
            && null == &json!({ "type": "null" })
        {
            *schema = body.clone();
        }
    }
}

/// A path, query or header parameter is text: it may be left out, never null.
fn parameters_are_never_null(doc: &mut Value) {
    for (_, op) in operations(doc) {
        for parameter in op.get_mut("parameters").and_then(Value::as_array_mut).into_iter().flatten() {
            if let Some(types) = parameter["schema"]["type"].as_array_mut() {
                types.retain(|t| t != "null");
                if let [only] = types.as_slice() {
                    parameter["schema"]["type"] = only.clone();
                }
            }
        }
    }
}

const METHODS: [&str; 8] = ["get", "put", "post", "delete", "patch", "options", "head", "trace"];

/// Every operation of the document, with its path.
pub fn operations(doc: &mut Value) -> impl Iterator<Item = (&String, &mut Map<String, Value>)> {
    doc["paths"]
        .as_object_mut()
        .into_iter()
        .flat_map(|paths| paths.iter_mut())
        .flat_map(|(path, item)| {
            item.as_object_mut()
                .into_iter()
                .flat_map(|item| item.iter_mut())
                .filter(|(method, _)| METHODS.contains(&method.as_str()))
                .filter_map(move |(_, op)| op.as_object_mut().map(|op| (path, op)))
        })
}

/// Adds a response, or appends to the description of the one declared.
fn add_response(op: &mut Map<String, Value>, status: &str, description: &str) {
    let responses = op.entry("responses").or_insert_with(|| json!({}));
    match responses.get_mut(status) {
        Some(existing) => {
            let text = existing["description"].as_str().unwrap_or_default();
            let merged = if text.is_empty() { description.to_string() } else { format!("{text}; {description}") };
            existing["description"] = Value::String(merged);
        }
        None => responses[status] = json!({ "description": description }),
    }
}

fn needs_key(op: &Map<String, Value>) -> bool {
    // No `security` of its own: the document's (the API key). `[{}]`: none.
    op.get("security").and_then(Value::as_array).is_none_or(|reqs| reqs.iter().any(|r| r.as_object().is_some_and(|r| !r.is_empty())))
}

fn reads_json(op: &Map<String, Value>) -> bool {
    op.get("requestBody").and_then(|b| b["content"].as_object()).is_some_and(|c| c.contains_key("application/json"))
}

fn has_path_parameter(op: &Map<String, Value>) -> bool {
    op.get("parameters").and_then(Value::as_array).is_some_and(|ps| ps.iter().any(|p| p["in"] == "path"))
}

/// The refusals that come from what a route is built of, not from its own logic.
fn shared_refusals(doc: &mut Value) {
    for (_, op) in operations(doc) {
        if needs_key(op) {
            add_response(
                op,
                "401",
                "`missing_api_key`, `malformed_api_key`, `unknown_api_key`: no valid key in the `x-api-key` header",
            );
        }
        if reads_json(op) {
            add_response(op, "400", "`malformed_json`, `unreadable_body`: the body is not JSON");
            add_response(op, "413", "`payload_too_large`: the JSON body is larger than 64 KiB");
            add_response(op, "415", "`unsupported_media_type`: the body is not sent as `application/json`");
            add_response(op, "422", "`unknown_field`, `missing_field`, `invalid_field`: the JSON does not have the body's shape");
        }
        if has_path_parameter(op) {
            add_response(op, "400", "`invalid_path`: a path parameter is not UTF-8 once percent-decoded");
        }
        add_response(op, "500", "`internal_error`: the host failed (its store, most likely); nothing was carried out");
    }
}

/// Every error response is a problem document.
fn problems(doc: &mut Value) {
    for (_, op) in operations(doc) {
        let Some(responses) = op.get_mut("responses").and_then(Value::as_object_mut) else { continue };
        for (status, response) in responses.iter_mut() {
            if status.parse::<u16>().is_ok_and(|s| s >= 400) {
                response["content"] = json!({ "application/problem+json": { "schema": { "$ref": PROBLEM } } });
            }
        }
    }
}

fn operation_mut<'a>(doc: &'a mut Value, path: &str, method: &str) -> Option<&'a mut Value> {
    doc["paths"].get_mut(path).and_then(|item| item.get_mut(method))
}

fn link(operation_id: &str, parameters: Value, description: &str) -> Value {
    let mut link = json!({ "operationId": operation_id, "description": description });
    if parameters.as_object().is_some_and(|p| !p.is_empty()) {
        link["parameters"] = parameters;
    }
    link
}

/// A created key can be revoked by its id.
fn link_keys(doc: &mut Value) {
    if let Some(created) = operation_mut(doc, "/api-keys", "post").and_then(|op| op["responses"].get_mut("201")) {
        created["links"] = json!({
            "revoke": link("revoke_key", json!({ "id": "$response.body#/id" }), "Revokes the key just created."),
        });
    }
}

/// A loaded plugin is read, replaced and unloaded by the name it was loaded as.
fn link_plugins(doc: &mut Value) {
    let links = json!({
        "get": link("get_plugin", json!({ "name": "$request.path.name" }), "The plugin just loaded."),
        "replace": link("replace_plugin", json!({ "name": "$request.path.name" }), "Replaces the plugin just loaded."),
        "unload": link("delete_plugin", json!({ "name": "$request.path.name" }), "Unloads the plugin just loaded."),
    });
    // The host reads the body's bytes whatever its content type.
    for method in ["post", "put"] {
        if let Some(content) = operation_mut(doc, "/plugins/{name}", method).and_then(|op| op["requestBody"]["content"].as_object_mut())
            && let Some(bytes) = content.get("application/octet-stream").cloned()
        {
            content.insert("application/wasm".into(), bytes);
        }
    }
    for (method, status) in [("post", "201"), ("put", "200"), ("put", "201")] {
        if let Some(response) = operation_mut(doc, "/plugins/{name}", method).and_then(|op| op["responses"].get_mut(status)) {
            response["links"] = links.clone();
        }
    }
}

/// An emergency stop engaged is lifted; lifted, it reads as not in force.
fn link_emergency_stop(doc: &mut Value) {
    if let Some(engaged) = operation_mut(doc, "/emergency-stop", "post").and_then(|op| op["responses"].get_mut("200")) {
        engaged["links"] = json!({ "lift": link("lift", json!({}), "Lifts the emergency stop just engaged.") });
    }
    if let Some(lifted) = operation_mut(doc, "/emergency-stop", "delete").and_then(|op| op["responses"].get_mut("200")) {
        lifted["links"] = json!({ "status": link("status", json!({}), "No emergency stop is in force any more.") });
    }
}
