//! The `kubectl-uyuni` binary: everything it does is in the library (`src/lib.rs`).

fn main() -> std::process::ExitCode {
    kubectl_uyuni::main()
}
