//! Real deployments, on loopback only: TLS (server-verified, a client certificate required, a
//! wrong CA, SNI), an ACL user with only the queue's keys and the commands the harness needs,
//! a user lacking one, and the run lock (two runs on the same queues at once).

mod support;

use emq_bench::cli::{RunArgs, TargetArgs};
use emq_bench::cmd::run::run;
use emq_bench::cmd::CommandOutcome;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn scenario(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios").join(name)
}

fn args(scenario: &Path, out: &Path, url: String, target: TargetArgs) -> RunArgs {
    RunArgs { url: Some(url), target, ..support::run_args(scenario, out) }
}

fn tls(certs: &support::Certs) -> TargetArgs {
    TargetArgs { cacert: Some(certs.file("ca.pem")), ..TargetArgs::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verified_tls_run_records_the_version_and_cipher_suite() {
    let tmp = tempfile::tempdir().unwrap();
    let certs = support::Certs::generate(tmp.path());
    let (_server, port) = support::tls_server(&certs, false);
    // `localhost` is a name the server certificate carries.
    let url = format!("rediss://localhost:{port}/");
    let result = run(args(&scenario("smoke.toml"), &tmp.path().join("out"), url, tls(&certs)), std::future::pending())
        .await
        .unwrap();
    assert_eq!(result.outcome, CommandOutcome::Success, "{:?}", result.failures);
    let tls = result.summary.target.tls.as_ref().expect("summary.json records the TLS session");
    assert!(tls.version.starts_with("TLSv1_"), "{tls:?}");
    assert!(!tls.cipher_suite.is_empty(), "{tls:?}");
    assert!(result.summary.target.url.starts_with("rediss://localhost:"), "{}", result.summary.target.url);
    assert!(result.summary.check.as_ref().unwrap().violations_total == 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_required_client_certificate_is_sent_and_its_absence_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let certs = support::Certs::generate(tmp.path());
    let (_server, port) = support::tls_server(&certs, true);
    let url = format!("rediss://localhost:{port}/");
    let with_cert =
        TargetArgs { cert: Some(certs.file("client.pem")), key: Some(certs.file("client.key")), ..tls(&certs) };
    let mut a = args(&scenario("smoke.toml"), &tmp.path().join("out"), url.clone(), with_cert);
    a.duration = Some(Duration::from_secs(1));
    let result = run(a, std::future::pending()).await.unwrap();
    assert_eq!(result.outcome, CommandOutcome::Success, "{:?}", result.failures);

    let err = run(args(&scenario("smoke.toml"), &tmp.path().join("no-cert"), url, tls(&certs)), std::future::pending())
        .await
        .err()
        .expect("refused without a client certificate");
    assert_eq!(err.exit_code(), 2, "{err}");
    assert!(err.to_string().contains(&format!("localhost:{port}")), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_ca_and_a_wrong_server_name_are_refused_and_sni_fixes_the_name() {
    let tmp = tempfile::tempdir().unwrap();
    let certs = support::Certs::generate(tmp.path());
    let (_server, port) = support::tls_server(&certs, false);
    let smoke = scenario("smoke.toml");
    let wrong_ca = TargetArgs { cacert: Some(certs.file("other-ca.pem")), ..TargetArgs::default() };
    let err = run(
        args(&smoke, &tmp.path().join("a"), format!("rediss://localhost:{port}/"), wrong_ca),
        std::future::pending(),
    )
    .await
    .err()
    .expect("a server certificate the CA did not sign is refused");
    assert_eq!(err.exit_code(), 2);
    assert!(err.to_string().contains("TLS handshake") && err.to_string().contains("UnknownIssuer"), "{err}");

    // 127.0.0.1 is not a name on the certificate ...
    let by_ip = format!("rediss://127.0.0.1:{port}/");
    let err = run(args(&smoke, &tmp.path().join("b"), by_ip.clone(), tls(&certs)), std::future::pending())
        .await
        .err()
        .expect("a certificate for other names is refused");
    assert_eq!(err.exit_code(), 2);
    assert!(err.to_string().contains("not valid for name \"127.0.0.1\""), "{err}");
    // ... but --sni emq.test sends and verifies the name it carries.
    let sni = TargetArgs { sni: Some("emq.test".into()), ..tls(&certs) };
    let mut a = args(&smoke, &tmp.path().join("c"), by_ip, sni);
    a.duration = Some(Duration::from_secs(1));
    let result = run(a, std::future::pending()).await.unwrap();
    assert_eq!(result.outcome, CommandOutcome::Success, "{:?}", result.failures);
    // --tls-skip-verify accepts the certificate whatever its names and issuer.
    let skip = TargetArgs { tls_skip_verify: true, ..TargetArgs::default() };
    let mut a = args(&smoke, &tmp.path().join("d"), format!("redis://127.0.0.1:{port}/"), skip);
    a.duration = Some(Duration::from_secs(1));
    let result = run(a, std::future::pending()).await.unwrap();
    assert_eq!(result.outcome, CommandOutcome::Success, "{:?}", result.failures);
    assert!(result.summary.target.tls.is_some(), "--tls-skip-verify implies TLS");
}

/// What the harness needs for the queues `bench*`: their keys, the run lock's key, and the
/// commands of docs/deployments.md's "Least privilege" rule (without INFO, to show the run goes on).
const BENCH_ACL: &str = "on >s3cret resetkeys ~emq:{bench*}:* ~emq-lock:{bench*} resetchannels -@all \
    +evalsha +eval +script|load +scan +unlink +zcard +zrange +hgetall +time +ping \
    +set +get +pttl +pexpire +del +client|setinfo \
    +exists +hset +hget +hmget +hincrby +zadd +zrem +zpopmin +zrangebyscore";

async fn acl_user(server: &emq_bench::server::EmbeddedServer, name: &str, rule: &str) {
    let mut conn = support::client(server).await.connection().clone();
    let mut cmd = redis::cmd("ACL");
    cmd.arg("SETUSER").arg(name);
    for part in rule.split_whitespace() {
        cmd.arg(part);
    }
    cmd.exec_async(&mut conn).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_least_privilege_user_runs_the_fencing_soak_clean_without_info() {
    let tmp = tempfile::tempdir().unwrap();
    let server = support::server();
    acl_user(&server, "bench", BENCH_ACL).await;
    let user = TargetArgs { user: Some("bench".into()), pass: Some("s3cret".into()), ..TargetArgs::default() };
    let mut a = args(&scenario("fencing-soak.toml"), tmp.path(), server.url(), user);
    a.duration = Some(Duration::from_secs(3));
    let result = run(a, std::future::pending()).await.unwrap();
    assert_eq!(result.outcome, CommandOutcome::Success, "{:?}", result.failures);
    assert_eq!(result.summary.check.as_ref().unwrap().violations_total, 0);
    let unavailable = &result.summary.target.unavailable;
    assert!(unavailable.iter().any(|u| u.contains("INFO") && u.contains("NOPERM")), "{unavailable:?}");
    let text = std::fs::read_to_string(tmp.path().join("summary.json")).unwrap();
    assert!(!text.contains("s3cret"), "the password is in summary.json");
    assert!(text.contains("redis://bench:***@127.0.0.1"), "the target is recorded with its password masked");
    // The probe's INFO is denied too: said once, and the run went on without server figures.
    let notes = &result.summary.server_samples.as_ref().expect("sampled").unavailable;
    assert_eq!(notes.iter().filter(|n| n.to_uppercase().contains("NOPERM")).count(), 1, "{notes:?}");
    let html = std::fs::read_to_string(tmp.path().join("report.html")).unwrap();
    assert!(!html.contains("s3cret") && html.contains("redis://bench:***@127.0.0.1"), "report.html shows the password");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_lacking_a_needed_command_gets_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let server = support::server();
    acl_user(&server, "bench", &BENCH_ACL.replace("+script|load ", "")).await;
    let user = TargetArgs { user: Some("bench".into()), pass: Some("s3cret".into()), ..TargetArgs::default() };
    let err = run(args(&scenario("smoke.toml"), tmp.path(), server.url(), user), std::future::pending())
        .await
        .err()
        .expect("refused");
    assert_eq!(err.exit_code(), 2, "{err}");
    let text = err.to_string();
    assert!(text.contains("NOPERM") && text.contains("script|load"), "{text}");
    assert!(!text.contains("s3cret"), "{text}");
}

#[test]
fn the_password_comes_from_the_environment_and_is_never_written() {
    let tmp = tempfile::tempdir().unwrap();
    let server = support::server();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(acl_user(&server, "bench", BENCH_ACL));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_emq-bench"))
        .args(["run", "scenarios/smoke.toml", "--quiet", "--user", "bench", "--url", &server.url(), "--out"])
        .arg(tmp.path().join("out"))
        .env("EMQ_PASSWORD", "s3cret")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(!stdout.contains("s3cret") && !stderr.contains("s3cret"));
    for entry in std::fs::read_dir(tmp.path().join("out")).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        assert!(!bytes.windows(6).any(|w| w == b"s3cret"), "the password is in a result file");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_runs_on_the_same_queues_at_once_one_runs_the_other_exits_2() {
    let tmp = tempfile::tempdir().unwrap();
    let server = support::server();
    let smoke = scenario("smoke.toml");
    let mut first = args(&smoke, &tmp.path().join("a"), server.url(), TargetArgs::default());
    first.duration = Some(Duration::from_secs(2));
    let second = RunArgs { out: Some(tmp.path().join("b")), ..first.clone() };
    let (a, b) = tokio::join!(run(first, std::future::pending()), run(second, std::future::pending()));
    let (ran, refused) = match (a, b) {
        (Ok(ran), Err(refused)) | (Err(refused), Ok(ran)) => (ran, refused),
        (a, b) => {
            panic!("expected one run and one refusal, got {:?} and {:?}", a.map(|r| r.outcome), b.map(|r| r.outcome))
        }
    };
    assert_eq!(ran.outcome, CommandOutcome::Success, "{:?}", ran.failures);
    assert_eq!(refused.exit_code(), 2);
    assert!(refused.to_string().contains("in use by another run"), "{refused}");
    // The lock went with the run: the same queues can be run again at once.
    let mut again = args(&smoke, &tmp.path().join("c"), server.url(), TargetArgs::default());
    again.duration = Some(Duration::from_secs(1));
    assert_eq!(run(again, std::future::pending()).await.unwrap().outcome, CommandOutcome::Success);
    let mut conn = support::client(&server).await.connection().clone();
    let left: Vec<String> = redis::cmd("KEYS").arg("*").query_async(&mut conn).await.unwrap();
    assert!(left.is_empty(), "keys left behind: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_lock_is_taken_over_fails_and_keeps_the_keys() {
    let tmp = tempfile::tempdir().unwrap();
    let server = support::server();
    let mut a = args(&scenario("smoke.toml"), tmp.path(), server.url(), TargetArgs::default());
    // Past the first renewal (every 10 s), which finds the lease another's.
    a.duration = Some(Duration::from_secs(11));
    let mut conn = support::client(&server).await.connection().clone();
    let thief = {
        let mut conn = conn.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            let _: () =
                redis::cmd("SET").arg("emq-lock:{bench-0}").arg("another run").query_async(&mut conn).await.unwrap();
        }
    };
    let (result, ()) = tokio::join!(run(a, std::future::pending()), thief);
    let result = result.unwrap();
    assert_eq!(result.outcome, CommandOutcome::Failed);
    support::assert_verdict_in_summary(&result);
    let said = result.failures.join("\n");
    assert!(said.contains("run lock lost") && said.contains("bench-0"), "{said}");
    let left: Vec<String> = redis::cmd("KEYS").arg("emq:{bench-0}:*").query_async(&mut conn).await.unwrap();
    assert!(!left.is_empty(), "the keys of a run that lost its lock are kept");
    let lock: String = redis::cmd("GET").arg("emq-lock:{bench-0}").query_async(&mut conn).await.unwrap();
    assert_eq!(lock, "another run", "the other run's lock is not released");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_in_the_scenario_url_is_masked_in_the_results_copy() {
    let tmp = tempfile::tempdir().unwrap();
    let server = support::server();
    acl_user(&server, "bench", &BENCH_ACL.replace(">s3cret", ">pa/ss@x")).await;
    let file = tmp.path().join("s.toml");
    let url = format!("redis://bench:pa%2Fss%40x@127.0.0.1:{}/", server.port());
    std::fs::write(
        &file,
        format!("name = \"s\"\nseed = 1\njobs = 20\n[target]\nurl = \"{url}\"\n[consumers]\ncount = 1\n"),
    )
    .unwrap();
    let out = tmp.path().join("out");
    let result = run(RunArgs { url: None, ..support::run_args(&file, &out) }, std::future::pending()).await.unwrap();
    assert_eq!(result.outcome, CommandOutcome::Success, "{:?}", result.failures);
    let copy = std::fs::read_to_string(out.join("scenario.toml")).unwrap();
    assert!(copy.contains("redis://bench:***@127.0.0.1"), "{copy}");
    for entry in std::fs::read_dir(&out).unwrap() {
        let text = String::from_utf8_lossy(&std::fs::read(entry.unwrap().path()).unwrap()).into_owned();
        assert!(!text.contains("pa%2Fss") && !text.contains("pa/ss"), "the password is in a result file");
    }
}
