# The `claims` binary on Debian 12, with the tools its upload stages call (Tesseract,
# poppler, prlimit). Built by docker-compose.yml; the same image runs every role.
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin claims

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates tesseract-ocr tesseract-ocr-eng poppler-utils util-linux \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/claims /usr/local/bin/claims
ENV CLAIMS_HTTP_ADDR=0.0.0.0:8080 CLAIMS_DATA_DIR=/var/lib/claims
EXPOSE 8080
ENTRYPOINT ["claims"]
CMD ["serve"]
