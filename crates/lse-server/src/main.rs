fn main() {
    eprintln!("lse-server: not built yet");
    std::process::exit(2);
}
