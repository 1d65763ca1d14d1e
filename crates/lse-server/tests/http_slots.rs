//! llama-server's `GET /slots` on the real binary and SmolLM2: one entry per `--parallel` slot,
//! the task it runs or ran last (counts, settings, decode progress), its texts only with
//! `LLAMA_SERVER_SLOTS_DEBUG` set, `?fail_on_no_slot=1` answering 503 while every slot is busy,
//! and a 501 under `--no-slots`; slot actions (`--slot-save-path`): a slot's cache saved,
//! erased and restored, in the same server and in a new one.

mod http;

use http::{model, Server};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

fn slots(s: &Server) -> Vec<Value> {
    let r = s.get("/slots");
    assert_eq!(r.status, 200, "{}", r.text);
    r.json().as_array().expect("an array").clone()
}

#[test]
fn slots_show_what_each_sequence_runs_and_ran() {
    let Some(m) = model() else { return };
    let s = Server::start(&m, &["--parallel", "1"]);
    let n_ctx = s.get("/props").json()["default_generation_settings"]["n_ctx"].clone();
    let idle = slots(&s);
    assert_eq!(idle, [json!({"id": 0, "n_ctx": n_ctx, "speculative": false, "is_processing": false})]);
    assert_eq!(s.get("/slots?fail_on_no_slot=1").status, 200);

    // a finished task stays on its slot; its texts (stop strings too) are not shown by default
    let done = s.post("/completion", &json!({"prompt": "The capital of France is", "n_predict": 8, "temperature": 0, "ignore_eos": true, "stop": ["Zq"]})).json();
    let slot = &slots(&s)[0];
    assert_eq!((slot["is_processing"].clone(), slot["id_task"].clone()), (json!(false), json!(0)));
    assert_eq!(slot["n_prompt_tokens"], done["tokens_evaluated"]);
    assert_eq!(slot["n_prompt_tokens_processed"], done["tokens_evaluated"]);
    assert_eq!(slot["n_prompt_tokens_cache"], 0);
    let mut settings = done["generation_settings"].clone();
    assert_eq!(settings.as_object_mut().unwrap().remove("stop"), Some(json!(["Zq"])));
    assert_eq!(slot["params"], settings);
    let new_line = done["content"].as_str().unwrap().contains('\n');
    assert_eq!(slot["next_token"], json!([{"has_next_token": false, "has_new_line": new_line, "n_remain": 0, "n_decoded": 8}]));
    assert!(slot.get("prompt").is_none() && slot.get("generated").is_none(), "{slot}");

    // a running one, while its client reads; then its slot is busy for load balancers
    let long = json!({"prompt": "Tell a long story:", "n_predict": 1500, "ignore_eos": true, "temperature": 0, "stream": true});
    let r = s.first_event("/completion", &long);
    let slot = &slots(&s)[0];
    assert_eq!((slot["is_processing"].clone(), slot["id_task"].clone()), (json!(true), json!(1)));
    assert_eq!(slot["params"]["n_predict"], 1500);
    let next = &slot["next_token"][0];
    let decoded = next["n_decoded"].as_i64().unwrap();
    assert!(decoded >= 1 && next["has_next_token"] == true, "{next}");
    assert_eq!(next["n_remain"].as_i64().unwrap(), 1500 - decoded);
    let busy = s.get("/slots?fail_on_no_slot=1");
    busy.assert_error(503, "every slot busy");
    assert!(busy.text.contains("no slot available"), "{}", busy.text);
    // the client leaves: the slot is free again and shows the task cut short
    drop(r);
    let t = Instant::now();
    while slots(&s)[0]["is_processing"] == true {
        assert!(t.elapsed() < Duration::from_secs(20), "the abandoned sequence still holds its slot");
        std::thread::sleep(Duration::from_millis(50));
    }
    let slot = &slots(&s)[0];
    assert_eq!(slot["id_task"], 1);
    assert!(slot["next_token"][0]["n_decoded"].as_i64().unwrap() < 1500);
    assert_eq!(s.get("/slots?fail_on_no_slot=1").status, 200);
}

/// With `LLAMA_SERVER_SLOTS_DEBUG=1` a slot shows its prompt (special tokens written out) and the
/// text its client got: cut before a stop string, without the end-of-turn token's text.
#[test]
fn slots_show_texts_when_asked_and_answer_501_when_off() {
    let Some(m) = model() else { return };
    let s = Server::start_env(&m, &["--parallel", "1"], &[("LLAMA_SERVER_SLOTS_DEBUG", "1")]);
    let prompt = "The capital of France is";
    let full = s.post("/completion", &json!({"prompt": prompt, "n_predict": 16, "temperature": 0, "ignore_eos": true})).json();
    let full = full["content"].as_str().unwrap().to_string();
    // a stop string from the middle of that answer
    let stop: String = full.trim_start().chars().skip(4).take(3).collect();
    assert!(!stop.trim().is_empty(), "{full:?}");
    let done = s.post("/completion", &json!({"prompt": prompt, "n_predict": 16, "temperature": 0, "ignore_eos": true, "stop": [stop]})).json();
    assert_eq!(done["stop_type"], "word", "{done}");
    let slot = &slots(&s)[0];
    assert_eq!((slot["prompt"].as_str(), slot["generated"].clone()), (Some(prompt), done["content"].clone()));
    let chat = "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n";
    let done = s.post("/completion", &json!({"prompt": chat, "n_predict": 64, "temperature": 0})).json();
    assert_eq!(done["stop_type"], "eos", "{done}");
    let slot = &slots(&s)[0];
    assert_eq!((slot["id_task"].clone(), slot["generated"].clone()), (json!(2), done["content"].clone()));
    assert_eq!(slot["prompt"], chat);
    drop(s);
    let s = Server::start(&m, &["--no-slots"]);
    let off = s.get("/slots");
    off.assert_error(501, "--no-slots");
    assert_eq!(off.json()["error"]["type"], "not_supported_error");
}

/// Two streams at once on two slots: each its own task, in the lowest free slots.
#[test]
fn concurrent_requests_take_their_own_slots() {
    let Some(m) = model() else { return };
    let s = Server::start(&m, &["--parallel", "3"]);
    let long = |p: &str| json!({"prompt": p, "n_predict": 1500, "temperature": 0, "ignore_eos": true, "stream": true});
    let (a, b) = (s.first_event("/completion", &long("One")), s.first_event("/completion", &long("Two")));
    let all = slots(&s);
    let busy: Vec<bool> = all.iter().map(|e| e["is_processing"] == true).collect();
    assert_eq!(busy, [true, true, false], "{all:?}");
    let mut tasks: Vec<i64> = all[..2].iter().map(|e| e["id_task"].as_i64().unwrap()).collect();
    tasks.sort();
    assert_eq!(tasks, [0, 1]);
    assert!(all[2].get("id_task").is_none());
    drop((a, b));
}

fn action(s: &Server, slot: usize, action: &str, file: Option<&str>) -> http::Reply {
    let body = file.map_or(json!({}), |f| json!({"filename": f}));
    s.post(&format!("/slots/{slot}?action={action}"), &body)
}

/// A slot's cache saved to a file, erased, and restored into another slot (then into a new
/// server process): the same prompt then runs only its last token and gives the same answer;
/// an action on a busy slot waits for its task, and is dropped if its client leaves first;
/// bad slots, names, files and actions are refused, another model's file too, and a server
/// without `--slot-save-path` answers 501.
#[test]
fn slot_actions_save_erase_and_restore_a_slots_cache() {
    let Some(m) = model() else { return };
    let dir = lse_testdata::tmp("http", "slot-files");
    let path = dir.to_str().unwrap().to_string();
    let s = Server::start(&m, &["--parallel", "2", "--slot-save-path", &path]);
    let ask = json!({"prompt": "The capital of France is a city that", "n_predict": 8, "temperature": 0});
    let first = s.post("/completion", &ask).json();
    assert_eq!(first["timings"]["cache_n"], 0);
    let held = first["tokens_evaluated"].as_u64().unwrap() + first["tokens_predicted"].as_u64().unwrap() - 1;
    let saved = action(&s, 0, "save", Some("a.bin")).json();
    assert_eq!((saved["id_slot"].clone(), saved["filename"].clone(), saved["n_saved"].clone()), (json!(0), json!("a.bin"), json!(held)), "{saved}");
    assert_eq!(saved["n_written"].as_u64(), Some(std::fs::metadata(dir.join("a.bin")).unwrap().len()));
    assert!(saved["timings"]["save_ms"].as_f64().is_some(), "{saved}");
    assert_eq!(action(&s, 0, "erase", None).json(), json!({"id_slot": 0, "n_erased": held}));
    assert_eq!(action(&s, 0, "erase", None).json(), json!({"id_slot": 0, "n_erased": 0}));
    // nothing kept: the prompt runs whole
    let again = s.post("/completion", &ask).json();
    assert_eq!((again["timings"]["cache_n"].clone(), again["content"].clone()), (json!(0), first["content"].clone()));
    action(&s, 0, "erase", None);
    let restored = action(&s, 1, "restore", Some("a.bin")).json();
    assert_eq!((restored["id_slot"].clone(), restored["n_restored"].clone(), restored["n_read"].clone()), (json!(1), json!(held), saved["n_written"].clone()), "{restored}");
    let cached = s.post("/completion", &ask).json();
    let prompt_n = first["tokens_evaluated"].as_u64().unwrap();
    assert_eq!((cached["timings"]["cache_n"].clone(), cached["content"].clone()), (json!(prompt_n - 1), first["content"].clone()), "{cached}");
    // it ran in slot 1, whose cache it started from (as llama-server picks the slot holding the
    // prompt), so that slot's cache is its session now and slot 0 holds none
    assert_eq!(action(&s, 1, "save", Some("b.bin")).json()["n_saved"], json!(held));
    assert_eq!(action(&s, 0, "save", Some("c.bin")).json()["n_saved"], json!(0));

    // refused: slot, name, file, action; another model's file
    action(&s, 2, "erase", None).assert_error(400, "slot past --parallel");
    action(&s, 0, "save", Some("../a.bin")).assert_error(400, "a path");
    action(&s, 0, "save", Some("")).assert_error(400, "an empty name");
    s.post("/slots/0?action=save", &json!({})).assert_error(400, "no filename");
    action(&s, 0, "restore", Some("missing.bin")).assert_error(400, "a missing file");
    action(&s, 0, "shred", None).assert_error(400, "an unknown action");
    std::fs::write(dir.join("junk.bin"), b"not a session").unwrap();
    action(&s, 0, "restore", Some("junk.bin")).assert_error(400, "not a session file");
    std::os::unix::fs::symlink(dir.join("a.bin"), dir.join("link.bin")).unwrap();
    let link = action(&s, 0, "restore", Some("link.bin"));
    link.assert_error(400, "a link");
    assert!(link.text.contains("not a plain file"), "{}", link.text);
    drop(s);
    let tiny = lse_testdata::golden("synthetic/llama-tiny.gguf").to_string_lossy().into_owned();
    let t = Server::start(&tiny, &["--slot-save-path", &path]);
    let other = action(&t, 0, "restore", Some("a.bin"));
    other.assert_error(400, "another model's file");
    assert!(other.text.contains("saved by model"), "{}", other.text);
    drop(t);

    // a new process reads the file back
    let s = Server::start(&m, &["--parallel", "2", "--slot-save-path", &path]);
    assert_eq!(action(&s, 0, "restore", Some("a.bin")).json()["n_restored"], json!(held));
    let cached = s.post("/completion", &ask).json();
    assert_eq!((cached["timings"]["cache_n"].clone(), cached["content"].clone()), (json!(prompt_n - 1), first["content"].clone()), "{cached}");
    // an action on a busy slot waits for its task to end, as llama-server defers it
    let long = json!({"prompt": "Tell a long story:", "n_predict": 1500, "ignore_eos": true, "temperature": 0, "stream": true});
    let stream = s.first_event("/completion", &long);
    let busy = slots(&s).iter().position(|e| e["is_processing"] == true).expect("a busy slot");
    std::thread::scope(|sc| {
        let erase = sc.spawn(|| action(&s, busy, "erase", None).json());
        std::thread::sleep(Duration::from_millis(300));
        assert!(!erase.is_finished(), "the action ran while its slot was busy");
        drop(stream);
        let erased = erase.join().unwrap();
        assert!(erased["n_erased"].as_u64().unwrap() > 1, "{erased}");
    });
    // one whose client leaves while it waits is dropped: the cache the task leaves stays
    let stream = s.first_event("/completion", &long);
    let busy = slots(&s).iter().position(|e| e["is_processing"] == true).expect("a busy slot");
    {
        use std::io::Write;
        let mut c = std::net::TcpStream::connect(s.base.trim_start_matches("http://")).unwrap();
        write!(c, "POST /slots/{busy}?action=erase HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{{}}").unwrap();
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_millis(200));
    drop(stream);
    let t = Instant::now();
    while slots(&s)[busy]["is_processing"] == true {
        assert!(t.elapsed() < Duration::from_secs(20), "the abandoned sequence still holds its slot");
        std::thread::sleep(Duration::from_millis(50));
    }
    let kept = action(&s, busy, "save", Some("kept.bin")).json();
    assert!(kept["n_saved"].as_u64().unwrap() > 1, "the abandoned erase ran: {kept}");
    drop(s);
    let s = Server::start(&m, &[]);
    let off = action(&s, 0, "erase", None);
    off.assert_error(501, "no --slot-save-path");
    assert_eq!(off.json()["error"]["type"], "not_supported_error");
}
