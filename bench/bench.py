#!/usr/bin/env python3
"""Prefill benchmark: lse-server vs llama.cpp's llama-perplexity on the same models, text and chunks.

Runs A B A B ... (interleaved, --runs each), measures each process's wall time and peak RSS with
/usr/bin/time, and prints the medians, prefill tokens/s (chunks x ctx tokens over the process wall time,
model load included for both) and the LSE/llama.cpp ratios as a Markdown table.

  bench/bench.py [--models smollm2 gemma3 qwen25coder] [--chunks 8] [--threads 2] [--runs 3]
                 [--simd avx512|avx2|scalar]   (LSE's kernel level; default: the CPU's best)
                 [--llama-perplexity PATH]   (default: $LLAMA_PERPLEXITY; llama.cpp is skipped when absent)
"""
import argparse, json, os, platform, re, statistics, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = {
    "smollm2": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma3": "gemma-3-270m-q4_k_m.gguf",
    "qwen25coder": "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
}
CTX = 512


def timed(cmd):
    """Run cmd under /usr/bin/time -v; return (wall seconds, peak RSS MiB, stdout)."""
    with tempfile.NamedTemporaryFile(mode="r", suffix=".time") as tf:
        p = subprocess.run(["/usr/bin/time", "-v", "-o", tf.name] + cmd,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if p.returncode != 0:
            sys.exit(f"bench: {' '.join(cmd[:3])}... failed ({p.returncode}): {p.stderr.strip()[-400:]}")
        t = tf.read()
    wall = re.search(r"Elapsed \(wall clock\) time.*: (?:(\d+):)?(\d+):([\d.]+)", t)
    secs = int(wall.group(1) or 0) * 3600 + int(wall.group(2)) * 60 + float(wall.group(3))
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", t).group(1)) / 1024
    return secs, rss, p.stdout + p.stderr


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", nargs="+", default=list(MODELS))
    ap.add_argument("--chunks", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--simd", default="")
    ap.add_argument("--llama-perplexity", default=os.environ.get("LLAMA_PERPLEXITY", ""))
    a = ap.parse_args()

    subprocess.run([os.path.join(ROOT, "scripts/get-models.sh")] + a.models, check=True)
    subprocess.run(["cargo", "build", "--quiet", "--release", "-p", "lse-server"], cwd=ROOT, check=True)
    lse = os.path.join(os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target"), "release/lse-server")
    text = os.path.join(ROOT, "data/wiki.test.raw")
    have_llama = bool(a.llama_perplexity) and os.path.exists(a.llama_perplexity)
    tokens = a.chunks * CTX

    rows = []
    for name in a.models:
        model = os.path.join(ROOT, "models", MODELS[name])
        lse_cmd = [lse, "--model", model, "--threads", str(a.threads), "--perplexity", text,
                   "--perplexity-chunks", str(a.chunks), "--quiet"] + (["--simd", a.simd] if a.simd else [])
        ll_cmd = [a.llama_perplexity, "-m", model, "-f", text, "-c", str(CTX), "--chunks", str(a.chunks),
                  "-t", str(a.threads)]
        res = {"lse": [], "llama": []}
        ppl = {}
        for _ in range(a.runs):
            w, r, out = timed(lse_cmd)
            res["lse"].append((w, r))
            ppl["lse"] = json.loads(out[out.index("{"):out.rindex("}") + 1])["perplexity"]
            if have_llama:
                w, r, out = timed(ll_cmd)
                res["llama"].append((w, r))
                m = re.findall(r"\[\d+\]([\d.]+)", out)
                ppl["llama"] = float(m[-1]) if m else float("nan")
        med = {k: (statistics.median(x[0] for x in v), max(x[1] for x in v)) for k, v in res.items() if v}
        rows.append((name, med, ppl))

    print(f"machine: {cpu_name()}, {os.cpu_count()} cores; threads {a.threads}; LSE kernels "
          f"{a.simd or 'best'}; wiki.test.raw, "
          f"ctx {CTX}, {a.chunks} chunks ({tokens} prefill tokens); median of {a.runs} runs, interleaved\n")
    print("| model | LSE wall s | LSE tok/s | LSE peak RSS MiB | LSE PPL | llama.cpp wall s | llama.cpp tok/s "
          "| llama.cpp peak RSS MiB | llama.cpp PPL | wall ratio | RSS ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, med, ppl in rows:
        lw, lr = med["lse"]
        cells = [name, f"{lw:.2f}", f"{tokens / lw:.0f}", f"{lr:.0f}", f"{ppl['lse']:.4f}"]
        if "llama" in med:
            cw, cr = med["llama"]
            cells += [f"{cw:.2f}", f"{tokens / cw:.0f}", f"{cr:.0f}", f"{ppl['llama']:.4f}",
                      f"{lw / cw:.2f}", f"{lr / cr:.2f}"]
        else:
            cells += ["-"] * 6
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
