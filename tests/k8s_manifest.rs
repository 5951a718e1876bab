//! The Kubernetes manifests of `deploy/k8s/` against the real CLI: the fleet Job's container
//! args and env parse as `emq-bench run` and resolve into shard 0..N of an N-shard fleet, the
//! merge Job's args parse as `emq-bench merge` of the folder the fleet writes, and the Job
//! settings a fleet depends on (one pod per shard, all at once, never retried; the password from
//! a Secret) hold. `scripts/check-k8s` checks the same files against Kubernetes' schemas; this
//! checks what no schema knows.
//!
//! The manifests are read as text by a small line parser, `k8s_text/`, whose doc lists the
//! shapes it reads (no YAML crate). The argv is the Dockerfile's `ENTRYPOINT` followed by the
//! container's args, `$(VAR)` expanded from its env. Nothing is set in the process environment:
//! the manifest's env values are passed as the flags whose `env` they name (a value given as a
//! flag wins over any EMQ_* variable of the shell running the tests).

mod k8s_text;

use clap::{CommandFactory, Parser};
use emq_bench::cli::{Cli, Command};
use emq_bench::cmd::session::RunOptions;
use k8s_text::{expand, expanded_env, literal, EnvVar, Manifest, Source};
use std::path::PathBuf;

/// The container's argv: the image's ENTRYPOINT (from the Dockerfile) then the args, expanded.
fn argv(manifest: &Manifest, env: &[EnvVar]) -> Vec<String> {
    let dockerfile = Manifest::from_file("Dockerfile");
    let entrypoint: Vec<String> = dockerfile
        .lines
        .iter()
        .find_map(|l| l.text.strip_prefix("ENTRYPOINT "))
        .map(|json| serde_json::from_str(json).expect("Dockerfile: ENTRYPOINT in exec form, [\"emq-bench\"]"))
        .expect("Dockerfile: no ENTRYPOINT");
    assert_eq!(entrypoint, ["emq-bench"], "Dockerfile: the manifests' args assume ENTRYPOINT [\"emq-bench\"]");
    assert!(
        manifest.values("command").is_empty(),
        "{}: a `command:` replaces the image's ENTRYPOINT; give only args",
        manifest.path
    );
    entrypoint.into_iter().chain(manifest.args().iter().map(|a| expand(a, env))).collect()
}

/// The fleet's manifest and its env, expanded.
fn fleet() -> (Manifest, Vec<EnvVar>) {
    let manifest = Manifest::read("fleet-job.yaml");
    let env = expanded_env(&manifest);
    (manifest, env)
}

/// The fleet's `EMQ_OUT`: the folder its shards write into.
fn fleet_out() -> PathBuf {
    let (manifest, env) = fleet();
    PathBuf::from(literal(&env, "EMQ_OUT", &manifest.path))
}

/// The manifest's env as the `run` flags that read the same variables (`--shards 3` for
/// `EMQ_SHARDS: "3"`; a bool flag is given when its value is not one of clap's false words).
/// Panics on a variable that no flag reads (the pod would ignore it: a typo) and on one that
/// Kubernetes sets itself. `EMQ_PASSWORD` is left out: no flag reads it, `run` does, and its
/// value is a Secret's.
fn env_as_flags(manifest: &Manifest, env: &[EnvVar]) -> Vec<String> {
    let cli = Cli::command();
    let run = cli.find_subcommand("run").expect("emq-bench has a run subcommand");
    let mut flags = Vec::new();
    for var in env {
        assert_ne!(
            var.name, "JOB_COMPLETION_INDEX",
            "{}: Kubernetes sets JOB_COMPLETION_INDEX in each pod; setting it would give every pod the same shard",
            manifest.path
        );
        if var.name == "EMQ_PASSWORD" {
            continue;
        }
        let arg = run
            .get_arguments()
            .find(|a| a.get_env().and_then(|e| e.to_str()) == Some(var.name.as_str()))
            .unwrap_or_else(|| {
                panic!(
                    "{}: env {} is read by no flag of `emq-bench run`: the pod would ignore it without a word \
                     (a misspelt name?)",
                    manifest.path, var.name
                )
            });
        let Source::Literal(value) = &var.source else { continue };
        let long = format!("--{}", arg.get_long().expect("every env flag of run is a --long flag"));
        if arg.get_action().takes_values() {
            flags.extend([long, value.clone()]);
        } else if !["", "n", "no", "f", "false", "off", "0"].contains(&value.to_lowercase().as_str()) {
            flags.push(long);
        }
    }
    flags
}

#[test]
fn the_fleet_jobs_args_parse_as_a_run_of_a_shipped_scenario() {
    let (manifest, env) = fleet();
    let argv = argv(&manifest, &env);
    let cli = Cli::try_parse_from(&argv)
        .unwrap_or_else(|e| panic!("{}: the pod would exit 2 on its args {argv:?}:\n{e}", manifest.path));
    let Command::Run(run) = cli.command else { panic!("{}: args {argv:?} are not `emq-bench run`", manifest.path) };
    let scenario = run.scenario.to_string_lossy();
    assert!(
        emq_bench::scenario::shipped::shipped(&scenario).is_some(),
        "{}: scenario {scenario:?} is no shipped one ({}): the image holds no scenarios/ folder, so a path \
         needs a volume with the file",
        manifest.path,
        emq_bench::scenario::shipped::names().join(", ")
    );
    for flag in ["--shard", "--pass"] {
        assert!(
            !argv.iter().any(|a| a == flag || a.starts_with(&format!("{flag}="))),
            "{}: {flag} in args: --shard comes from each pod's JOB_COMPLETION_INDEX, the password from \
             EMQ_PASSWORD (a Secret), never the command line",
            manifest.path
        );
    }
}

#[test]
fn the_fleet_jobs_env_resolves_into_its_first_and_last_shard() {
    let (manifest, env) = fleet();
    let path = &manifest.path;
    let shards: u32 = manifest.scalar("completions").parse().expect("completions is a number");
    let group = literal(&env, "EMQ_GROUP", path);
    let out = PathBuf::from(literal(&env, "EMQ_OUT", path));
    let url = literal(&env, "EMQ_URL", path);
    let base: Vec<String> = argv(&manifest, &env).into_iter().chain(env_as_flags(&manifest, &env)).collect();
    for index in [0, shards - 1] {
        // What Kubernetes adds to pod `index`: JOB_COMPLETION_INDEX, here as the flag it sets.
        let argv: Vec<String> = base.iter().cloned().chain(["--shard".into(), index.to_string()]).collect();
        let cli = Cli::try_parse_from(&argv)
            .unwrap_or_else(|e| panic!("{path}: pod {index} would exit 2 on its args and env, {argv:?}:\n{e}"));
        let Command::Run(run) = cli.command else { panic!("{path}: not a run") };
        let options = RunOptions::resolve(&run)
            .unwrap_or_else(|e| panic!("{path}: pod {index} would exit 2 before connecting, {argv:?}:\n{e}"));
        let fleet = options.fleet.as_ref().unwrap_or_else(|| {
            panic!("{path}: pod {index} would run alone, not as a shard: EMQ_SHARDS must be completions ({shards})")
        });
        let barrier = &fleet.barrier;
        assert_eq!(
            (barrier.index, barrier.shards),
            (index, shards),
            "{path}: pod {index} would be shard {} of {} at the barrier, not {index} of completions {shards}",
            barrier.index,
            barrier.shards
        );
        assert_eq!(barrier.group, group, "{path}: the barrier's group is not EMQ_GROUP");
        assert_eq!(
            options.out,
            Some(out.join(format!("shard-{index:03}"))),
            "{path}: pod {index} would not write its shard folder inside EMQ_OUT, where the merge looks"
        );
        assert_eq!(options.url.as_deref(), Some(url.as_str()), "{path}: the shards would not drive EMQ_URL");
    }
}

#[test]
fn the_fleet_job_runs_one_pod_per_shard_all_at_once_and_never_again() {
    let (manifest, env) = fleet();
    let path = &manifest.path;
    let shards = literal(&env, "EMQ_SHARDS", path);
    let completions = manifest.scalar("completions");
    let parallelism = manifest.scalar("parallelism");
    assert_eq!(
        completions, shards,
        "{path}: completions {completions} != EMQ_SHARDS {shards}: pods with an index >= EMQ_SHARDS exit 2, or \
         shards never get a pod and the barrier times out"
    );
    assert_eq!(
        parallelism, shards,
        "{path}: parallelism {parallelism} != EMQ_SHARDS {shards}: the shards that wait for a pod slot miss the \
         start barrier and the fleet fails"
    );
    assert_eq!(
        manifest.scalar("completionMode"),
        "Indexed",
        "{path}: without completionMode: Indexed, Kubernetes sets no JOB_COMPLETION_INDEX and no pod knows its shard"
    );
    assert_eq!(
        manifest.scalar("backoffLimit"),
        "0",
        "{path}: a retried shard cannot rejoin a fleet that has started (its folder is taken, the barrier gone); \
         backoffLimit must be 0"
    );
    assert_eq!(
        manifest.scalar("restartPolicy"),
        "Never",
        "{path}: a shard restarted in place would find its folder taken and the barrier gone; restartPolicy must be Never"
    );
}

#[test]
fn the_password_comes_from_the_secret_and_the_secret_is_required() {
    let (manifest, env) = fleet();
    assert_password_from_secret(&env, &manifest.path);
}

/// The manifest's `EMQ_PASSWORD` comes from password-secret.yaml's Secret, required, and its
/// `EMQ_URL` holds no password.
fn assert_password_from_secret(env: &[EnvVar], path: &str) {
    let secret = Manifest::read("password-secret.yaml");
    let password = env.iter().find(|v| v.name == "EMQ_PASSWORD").unwrap_or_else(|| {
        panic!("{path}: no EMQ_PASSWORD env: it would connect without a password and fail at the first command")
    });
    let Source::From { kind, fields } = &password.source else {
        panic!("{path}: EMQ_PASSWORD is a literal value: the password would sit in the Job's spec for anyone who can read it")
    };
    assert_eq!(kind, "secretKeyRef", "{path}: EMQ_PASSWORD must come from a Secret (secretKeyRef), not a {kind}");
    assert_eq!(
        fields.get("name"),
        Some(&secret.scalar("name")),
        "{path}: EMQ_PASSWORD names another Secret than {}'s: the pods would wait for a Secret nobody made",
        secret.path
    );
    let keys: Vec<String> =
        secret.block("stringData").iter().filter_map(|l| l.entry().map(|(k, _)| k.to_string())).collect();
    assert!(
        fields.get("key").is_some_and(|k| keys.contains(k)),
        "{path}: EMQ_PASSWORD's key {:?} is not one of {}'s stringData keys {keys:?}",
        fields.get("key"),
        secret.path
    );
    assert_ne!(
        fields.get("optional").map(String::as_str),
        Some("true"),
        "{path}: an optional password Secret lets the pods start without it and fail at AUTH; leave it required"
    );
    let url = literal(env, "EMQ_URL", path);
    let parsed = url::Url::parse(&url).unwrap_or_else(|e| panic!("{path}: EMQ_URL {url:?}: {e}"));
    assert!(parsed.password().is_none(), "{path}: EMQ_URL holds a password: it belongs in the Secret");
}

#[test]
fn the_merge_job_merges_the_folder_the_fleet_writes() {
    let manifest = Manifest::read("merge-job.yaml");
    let env = expanded_env(&manifest);
    let argv = argv(&manifest, &env);
    let cli = Cli::try_parse_from(&argv)
        .unwrap_or_else(|e| panic!("{}: the pod would exit 2 on its args {argv:?}:\n{e}", manifest.path));
    let Command::Merge(merge) = cli.command else {
        panic!("{}: args {argv:?} are not `emq-bench merge`", manifest.path)
    };
    let out = fleet_out();
    assert_eq!(
        merge.dirs,
        std::slice::from_ref(&out),
        "{}: merges another folder than fleet-job.yaml's EMQ_OUT: it would find no shards (same EMQ_GROUP in both?)",
        manifest.path
    );
    assert_eq!(
        merge.out,
        out.join("merged"),
        "{}: --out is not <EMQ_OUT>/merged, where the fleet's own merge writes",
        manifest.path
    );
    // A `shared` fleet's merge checks the queues on the fleet's server: the same EMQ_URL,
    // read by `merge --url`, and the password from the same Secret.
    let fleet = Manifest::read("fleet-job.yaml");
    let fleet_url = literal(&expanded_env(&fleet), "EMQ_URL", &fleet.path);
    assert_eq!(
        literal(&env, "EMQ_URL", &manifest.path),
        fleet_url,
        "{}: EMQ_URL is not fleet-job.yaml's: a shared fleet's merge would check another server",
        manifest.path
    );
    let merge_cmd = Cli::command();
    let merge_cmd = merge_cmd.find_subcommand("merge").expect("emq-bench has a merge subcommand");
    assert!(
        merge_cmd.get_arguments().any(|a| a.get_env().and_then(|e| e.to_str()) == Some("EMQ_URL")),
        "`emq-bench merge` reads no flag from EMQ_URL: {}'s server would be ignored",
        manifest.path
    );
    assert_password_from_secret(&env, &manifest.path);
}

#[test]
fn both_jobs_share_the_image_and_the_read_write_many_results_claim() {
    let (fleet, env) = fleet();
    let merge = Manifest::read("merge-job.yaml");
    let pvc = Manifest::read("results-pvc.yaml");
    let claim = pvc.scalar("name");
    assert!(
        pvc.block("accessModes").iter().any(|l| l.text == "- ReadWriteMany"),
        "{}: the claim must be ReadWriteMany: the shards' pods write it at once, from several nodes",
        pvc.path
    );
    for job in [&fleet, &merge] {
        assert_eq!(
            job.scalar("claimName"),
            claim,
            "{}: mounts another claim than {}'s {claim}: it would not see the shards' folders",
            job.path,
            pvc.path
        );
    }
    assert_eq!(fleet.scalar("image"), merge.scalar("image"), "merge-job.yaml runs another image than fleet-job.yaml");
    let mount = PathBuf::from(fleet.scalar("mountPath"));
    assert!(
        fleet_out().starts_with(&mount),
        "{}: EMQ_OUT {} is not on the results volume ({}): the shards' folders would vanish with their pods",
        fleet.path,
        literal(&env, "EMQ_OUT", &fleet.path),
        mount.display()
    );
    for file in ["fleet-job.yaml", "merge-job.yaml", "results-pvc.yaml", "password-secret.yaml"] {
        let names = Manifest::read(file).values("app.kubernetes.io/name");
        assert!(
            !names.is_empty() && names.iter().all(|n| n == "emq-bench"),
            "deploy/k8s/{file}: every object and pod template is labelled app.kubernetes.io/name: emq-bench \
             (found {names:?}), so one selector finds them all"
        );
    }
}
