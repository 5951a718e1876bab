# The emq-bench image for a fleet on Kubernetes (deploy/k8s/) or a single run in a container.
#
# Not built where it was written (that machine has no Docker engine): a first build may show a
# fix it needs. Build from the repository's root:
#   docker build -t emq-bench:latest .
#   docker run --rm -e EMQ_PASSWORD emq-bench:latest run smoke --url redis://valkey.example.com:6379
#
# The image has no valkey-server: `run` needs --url (or $EMQ_URL) here, not the embedded server.

# Stage 1: the release build, with Cargo.toml's [profile.release] (fat LTO: the harness must not
# be the bottleneck; minutes per clean build). --locked: exactly the versions of Cargo.lock.
FROM rust:1-bookworm AS builder
WORKDIR /src
COPY . .
RUN cargo build --release --locked \
    && install -m 0755 target/release/emq-bench /emq-bench

# Stage 2: the binary alone on the same Debian release as the builder, so its glibc matches.
FROM debian:bookworm-slim
# ca-certificates: a rediss:// target is verified against the system's roots when no --cacert
# is given (rustls-native-certs reads them from here).
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY --from=builder /emq-bench /usr/local/bin/emq-bench
# A non-root user with a numeric id, so Kubernetes' runAsNonRoot can check it without a lookup
# (deploy/k8s/ runs as 10001 too). /work is its working directory and the default results/
# folder of a run without --out.
RUN groupadd --gid 10001 emq \
    && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /work --shell /usr/sbin/nologin emq \
    && mkdir /work && chown 10001:10001 /work
USER 10001:10001
WORKDIR /work
ENTRYPOINT ["emq-bench"]
CMD ["--help"]
