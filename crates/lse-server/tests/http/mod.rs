//! Helpers of the HTTP tests: the real `lse-server` binary on port 0 with SmolLM2, driven by a
//! real HTTP client (ureq).

#![allow(dead_code)]

use serde_json::Value;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_lse-server");

/// SmolLM2, or `None` (the test is skipped, with a printed reason) when it is unavailable.
pub fn model() -> Option<String> {
    lse_testdata::model("smollm2").map(|p| p.to_string_lossy().into_owned())
}

/// Engine flags that keep the tests small: 2 threads, 2048-token sessions.
pub const ENGINE: [&str; 4] = ["--threads", "2", "--kv-len", "2048"];

pub struct Server {
    pub child: Child,
    pub base: String,
    agent: ureq::Agent,
}

pub struct Reply {
    pub status: u16,
    pub text: String,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text))
    }

    /// Asserts an error reply: the status and the `{"error": {"message", "type", "code"}}` shape.
    pub fn assert_error(&self, status: u16, what: &str) {
        assert_eq!(self.status, status, "{what}: {}", self.text);
        let v = self.json();
        let e = &v["error"];
        assert!(e["message"].as_str().is_some_and(|m| !m.is_empty()), "{what}: {}", self.text);
        assert!(e["type"].is_string(), "{what}: {}", self.text);
        assert_eq!(e["code"].as_u64(), Some(status as u64), "{what}: {}", self.text);
    }
}

/// Characters `skip..skip + take` of `data/wiki.test.raw`: a prompt of real text.
pub fn wiki(skip: usize, take: usize) -> String {
    let text = std::fs::read_to_string(lse_testdata::data("wiki.test.raw")).unwrap();
    text.chars().skip(skip).take(take).collect()
}

impl Server {
    /// How many tokens the server's tokenizer makes of `text`.
    pub fn n_tokens(&self, text: &str) -> usize {
        self.post("/tokenize", &serde_json::json!({"content": text})).json()["tokens"].as_array().unwrap().len()
    }

    /// Starts `lse-server --model M --port 0 ENGINE extra…` (`extra` may replace an `ENGINE` flag), reads the address it prints and waits
    /// for `/health` to say ok.
    pub fn start(model: &str, extra: &[&str]) -> Server {
        let s = Server::spawn(model, extra);
        s.wait_ready();
        s
    }

    /// [`Server::start`] with environment variables `env` set for the server.
    pub fn start_env(model: &str, extra: &[&str], env: &[(&str, &str)]) -> Server {
        let s = Server::spawn_env(model, extra, env);
        s.wait_ready();
        s
    }

    /// Starts the server and returns once it has printed its address (the model may be loading).
    pub fn spawn(model: &str, extra: &[&str]) -> Server {
        Server::spawn_env(model, extra, &[])
    }

    fn spawn_env(model: &str, extra: &[&str], env: &[(&str, &str)]) -> Server {
        let mut child = Command::new(BIN)
            // what the tests expect by default, whatever the runner's environment says
            .env_remove("LLAMA_SERVER_SLOTS_DEBUG")
            .envs(env.iter().copied())
            .args(["--model", model, "--port", "0"])
            // the engine flags `extra` does not set itself
            .args(ENGINE.chunks(2).filter(|f| !extra.contains(&f[0])).flatten())
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start lse-server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let base = line.trim().rsplit(' ').next().unwrap_or_default().to_string();
        assert!(base.starts_with("http://127.0.0.1:") && !base.ends_with(":0"), "listening line: {line:?}");
        let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(300)).build();
        Server { child, base, agent }
    }

    /// Waits for `/health` to say ok; until then it must be a 503 JSON error.
    pub fn wait_ready(&self) {
        let s = self;
        let t = Instant::now();
        loop {
            let r = s.get("/health");
            if r.status == 200 {
                assert_eq!(r.json(), serde_json::json!({"status": "ok"}));
                break;
            }
            r.assert_error(503, "health while loading");
            assert!(t.elapsed() < Duration::from_secs(120), "the model did not load");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn reply(r: Result<ureq::Response, ureq::Error>) -> Reply {
        match r {
            Ok(resp) => Reply { status: resp.status(), text: resp.into_string().unwrap() },
            Err(ureq::Error::Status(code, resp)) => Reply { status: code, text: resp.into_string().unwrap_or_default() },
            Err(e) => panic!("transport error: {e}"),
        }
    }

    pub fn get(&self, path: &str) -> Reply {
        Self::reply(self.agent.get(&format!("{}{path}", self.base)).call())
    }

    pub fn get_with(&self, path: &str, header: (&str, &str)) -> Reply {
        Self::reply(self.agent.get(&format!("{}{path}", self.base)).set(header.0, header.1).call())
    }

    /// A request of any method with `headers` and no body: its status and the response's value
    /// of header `want` (lowercase).
    pub fn header_of(&self, method: &str, path: &str, headers: &[(&str, &str)], want: &str) -> (u16, Option<String>) {
        let mut req = self.agent.request(method, &format!("{}{path}", self.base));
        for (k, v) in headers {
            req = req.set(k, v);
        }
        let resp = match req.call() {
            Ok(r) => r,
            Err(ureq::Error::Status(_, r)) => r,
            Err(e) => panic!("transport error: {e}"),
        };
        (resp.status(), resp.header(want).map(str::to_string))
    }

    pub fn post(&self, path: &str, body: &Value) -> Reply {
        self.post_raw(path, body.to_string().as_bytes())
    }

    pub fn post_raw(&self, path: &str, body: &[u8]) -> Reply {
        Self::reply(self.agent.post(&format!("{}{path}", self.base)).set("Content-Type", "application/json").send_bytes(body))
    }

    pub fn post_with(&self, path: &str, body: &Value, header: (&str, &str)) -> Reply {
        Self::reply(self.agent.post(&format!("{}{path}", self.base)).set(header.0, header.1).send_string(&body.to_string()))
    }

    /// A streamed request: the JSON of every `data:` event before `[DONE]` (which must come).
    pub fn stream(&self, path: &str, body: &Value) -> Vec<Value> {
        let (events, done) = self.events(path, body);
        assert!(done, "the stream ended without [DONE]");
        events
    }

    /// A streamed request in llama-server's own form: every `data:` event until the body ends,
    /// with no `[DONE]`.
    pub fn stream_native(&self, path: &str, body: &Value) -> Vec<Value> {
        let (events, done) = self.events(path, body);
        assert!(!done, "llama-server's own streams send no [DONE]");
        events
    }

    /// Opens a streamed request on its own connection and reads its first event; dropping the
    /// reader hangs up (a client that leaves).
    pub fn first_event(&self, path: &str, body: &Value) -> impl BufRead {
        let resp = ureq::AgentBuilder::new().build().post(&format!("{}{path}", self.base)).send_string(&body.to_string()).unwrap();
        let mut r = BufReader::new(resp.into_reader());
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        assert!(line.starts_with("data: "), "{line:?}");
        r
    }

    /// The `data:` events of a streamed request up to `[DONE]` or the end, and whether `[DONE]` came.
    fn events(&self, path: &str, body: &Value) -> (Vec<Value>, bool) {
        let resp = self.agent.post(&format!("{}{path}", self.base)).send_string(&body.to_string()).expect("stream request");
        assert_eq!(resp.status(), 200);
        assert!(resp.content_type().starts_with("text/event-stream"), "{}", resp.content_type());
        let mut events = Vec::new();
        let mut done = false;
        for line in BufReader::new(resp.into_reader()).lines() {
            let line = line.unwrap();
            let Some(data) = line.strip_prefix("data: ") else { continue };
            if data == "[DONE]" {
                done = true;
                break;
            }
            events.push(serde_json::from_str(data).unwrap());
        }
        (events, done)
    }

    /// Sends a body of `len` bytes from another thread while reading the answer (a server that
    /// refuses the size may answer and close before the body is all sent).
    pub fn oversized_post(&self, path: &str, len: usize) -> Reply {
        use std::io::Write;
        let addr = self.base.trim_start_matches("http://").to_string();
        let mut c = std::net::TcpStream::connect(&addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        write!(c, "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n").unwrap();
        let mut w = c.try_clone().unwrap();
        let writer = std::thread::spawn(move || {
            let block = vec![b' '; 1 << 16];
            let mut left = len;
            while left > 0 {
                let n = left.min(block.len());
                if w.write_all(&block[..n]).is_err() {
                    break;
                }
                left -= n;
            }
        });
        let raw = read_all(&mut c);
        let _ = writer.join();
        let status = raw.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("no status line: {raw:?}"));
        let text = raw.split("\r\n\r\n").nth(1).unwrap_or_default().to_string();
        Reply { status, text }
    }

    pub fn health_ok(&self, after: &str) {
        let r = self.get("/health");
        assert_eq!(r.status, 200, "after {after}: {}", r.text);
    }

    /// A metric's value from `/metrics`.
    pub fn metric(&self, name: &str) -> f64 {
        let all = self.scrape();
        *all.get(name).unwrap_or_else(|| panic!("no metric {name} in {all:?}"))
    }

    /// Every metric of one `/metrics` scrape, by name.
    pub fn scrape(&self) -> std::collections::HashMap<String, f64> {
        let r = self.get("/metrics");
        assert_eq!(r.status, 200);
        r.text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.split_once(' ').map(|(name, v)| (name.to_string(), v.trim().parse::<f64>().unwrap())))
            .collect()
    }

    /// SIGTERM; the exit status (`None` if it did not exit within 20 s, then it is killed).
    pub fn terminate(mut self) -> Option<i32> {
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(20) {
            if let Ok(Some(st)) = self.child.try_wait() {
                return st.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads a whole stream body (for tests that read it by hand).
pub fn read_all(mut r: impl Read) -> String {
    let mut s = String::new();
    let _ = r.read_to_string(&mut s);
    s
}

/// Runs the CLI and parses its JSON report.
pub fn cli_json(args: &[&str]) -> Value {
    let o = Command::new(BIN).args(args).args(ENGINE).arg("--quiet").output().unwrap();
    assert!(o.status.success(), "lse-server {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}
