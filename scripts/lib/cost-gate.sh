# Sourced by scripts/regress and scripts/bench-cost-gate: how the script-cost gate is built and
# sized, in one place, so the benchmark measures the gate CI runs.

# The binary: the `gate` profile (optimised, no fat LTO) without the embedded scripts (cargo
# feature embedded-lua off), so an edit of lua/ or a checkout of another revision's lua/ does not
# rebuild it; `cost` reads both arms' scripts from disk.
gate_bin=${CARGO_TARGET_DIR:-target}/gate/emq-bench

# gate_build: builds $gate_bin (a no-op when src/ and Cargo.* are unchanged).
gate_build() {
  cargo build --profile gate --no-default-features --quiet
}

# The gate's `emq-bench cost` sizing: 8 000 calls per script and round (blocks of 200 calls: more
# pairs per second than 500-call blocks, at about the same spread per pair on this VM), rounds
# until every script is decided or the budget (3 min; --quick 45 s) is spent.
gate_calls=8000
gate_budget=3m
gate_quick_budget=45s
