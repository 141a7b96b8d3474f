//! A small HTTP client for the API.

use reqwest::header::CONTENT_TYPE;
use serde_json::Value;

#[derive(Clone)]
pub struct Api {
    pub base: String,
    pub key: Option<String>,
    http: reqwest::Client,
}

/// A response: status, headers, content type and body (JSON when it parses).
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub content_type: String,
    pub text: String,
    pub body: Value,
}

impl Reply {
    /// The problem code of an error reply; panics if it is not problem+json.
    pub fn code(&self) -> &str {
        assert_eq!(self.content_type, "application/problem+json", "not a problem document: {self:?}");
        self.body["code"].as_str().unwrap_or_else(|| panic!("problem without code: {self:?}"))
    }
}

impl Api {
    pub fn new(base: String, key: Option<String>) -> Self {
        Api { base, key, http: reqwest::Client::new() }
    }

    pub fn with_key(&self, key: Option<&str>) -> Api {
        Api { key: key.map(str::to_string), ..self.clone() }
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(key) = &self.key {
            req = req.header("x-api-key", key);
        }
        req
    }

    async fn send(req: reqwest::RequestBuilder) -> Reply {
        let resp = req.send().await.expect("the host answers");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let content_type = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
        let text = resp.text().await.expect("a readable body");
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Reply { status, headers, content_type, text, body }
    }

    pub async fn get(&self, path: &str) -> Reply {
        Self::send(self.request(reqwest::Method::GET, path)).await
    }

    pub async fn delete(&self, path: &str) -> Reply {
        Self::send(self.request(reqwest::Method::DELETE, path)).await
    }

    pub async fn post_json(&self, path: &str, body: &Value) -> Reply {
        Self::send(self.request(reqwest::Method::POST, path).json(body)).await
    }

    /// Posts with no body at all.
    pub async fn post_empty(&self, path: &str) -> Reply {
        Self::send(self.request(reqwest::Method::POST, path)).await
    }

    /// Posts JSON with extra headers.
    pub async fn post_json_with(&self, path: &str, body: &Value, headers: &[(&str, &str)]) -> Reply {
        let mut req = self.request(reqwest::Method::POST, path).json(body);
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        Self::send(req).await
    }

    /// Sends a body as is, with the given content type.
    pub async fn send_raw(&self, method: &str, path: &str, content_type: &str, body: Vec<u8>) -> Reply {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("an HTTP method");
        Self::send(self.request(method, path).header(CONTENT_TYPE, content_type).body(body)).await
    }

    /// Uploads a file as the multipart part `part` of a POST to `path`.
    pub async fn upload(&self, path: &str, part: &str, bytes: Vec<u8>) -> Reply {
        let file = reqwest::multipart::Part::bytes(bytes).file_name("app.apk").mime_str("application/vnd.android.package-archive").expect("a mime type");
        let form = reqwest::multipart::Form::new().part(part.to_string(), file);
        Self::send(self.request(reqwest::Method::POST, path).multipart(form)).await
    }

    /// Starts an experiment on `platform`, which must be accepted; its answer.
    pub async fn start(&self, platform: &str, request: &Value) -> Value {
        let started = self.post_json(&format!("/experiments/{platform}/start"), request).await;
        assert_eq!(started.status, 201, "{started:?}");
        started.body
    }

    /// Creates an API key of `role` (with an admin key); the key.
    pub async fn create_key(&self, name: &str, role: &str) -> String {
        let created = self.post_json("/api-keys", &serde_json::json!({"name": name, "role": role})).await;
        assert_eq!(created.status, 201, "{created:?}");
        created.body["key"].as_str().unwrap().to_string()
    }

    /// Stops an experiment; the answer comes once it is rolled back.
    pub async fn stop(&self, platform: &str, id: &str) -> Reply {
        self.post_json(&format!("/experiments/{platform}/stop?id={id}"), &Value::Object(Default::default())).await
    }

    /// Starts a backend experiment and waits until its first target's fault
    /// is in effect (or the experiment has ended); returns its id.
    pub async fn start_in_effect(&self, request: &Value) -> String {
        let started = self.post_json("/experiments/backend/start", request).await;
        assert_eq!(started.status, 201, "{started:?}");
        let id = started.body["id"].as_str().unwrap().to_string();
        self.wait_status("backend", &id, 60, |s| s["targets"][0]["injection"] == "active" || s["state"] != "running").await;
        id
    }

    /// Polls an experiment's status until `done` holds, or panics after `secs`.
    pub async fn wait_status(&self, platform: &str, id: &str, secs: u64, mut done: impl FnMut(&Value) -> bool) -> Value {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        loop {
            let reply = self.get(&format!("/experiments/{platform}/status?id={id}")).await;
            assert_eq!(reply.status, 200, "{reply:?}");
            if done(&reply.body) {
                return reply.body;
            }
            assert!(std::time::Instant::now() < deadline, "status never got there: {}", reply.body);
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
}
