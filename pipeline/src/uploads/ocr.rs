//! Reading a document's text with the tools payers run: Tesseract for images, poppler's
//! `pdftotext` for a PDF's text layer, and for a page without one, the page rendered by
//! `pdftoppm` and read by Tesseract. Each tool runs under `prlimit` (address-space
//! limit) and the document's deadline, and is killed when either is broken, so that no
//! document can hang the stage or exhaust the machine.

use std::path::Path;
use std::process::Stdio;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use regex::Regex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use crate::store::Extraction;

/// Bounds on one document.
#[derive(Debug, Clone, Copy)]
pub struct OcrLimits {
    pub max_pages: u32,
    /// For the whole document, every tool included.
    pub timeout: Duration,
    /// Address space of each tool process.
    pub max_memory_bytes: u64,
}

impl Default for OcrLimits {
    fn default() -> Self {
        Self {
            max_pages: 20,
            timeout: Duration::from_secs(120),
            max_memory_bytes: 1 << 30,
        }
    }
}

/// Resolution pages are rendered at for OCR.
const RENDER_DPI: &str = "150";
/// Most bytes read from a tool's output: a bound on memory, far above any page's text
/// or a rendered page.
const MAX_OUTPUT_BYTES: u64 = 64 << 20;

/// Most bytes of a plain-text document kept as its text.
const MAX_TEXT_BYTES: u64 = 1 << 20;

/// What kind of document the file is, by its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Pdf,
    Image,
    Text,
    Other,
}

pub fn sniff(head: &[u8]) -> Kind {
    const IMAGES: [&[u8]; 6] = [
        b"\x89PNG\r\n\x1a\n",
        b"\xff\xd8\xff",
        b"II*\0",
        b"MM\0*",
        b"GIF8",
        b"BM",
    ];
    if head.starts_with(b"%PDF-") {
        Kind::Pdf
    } else if IMAGES.iter().any(|m| head.starts_with(m)) {
        Kind::Image
    } else if !head.is_empty() && is_utf8_prefix(head) {
        Kind::Text
    } else {
        Kind::Other
    }
}

/// Whether `head` is UTF-8, allowing a character cut at its end.
fn is_utf8_prefix(head: &[u8]) -> bool {
    match std::str::from_utf8(head) {
        Ok(_) => true,
        Err(e) => e.error_len().is_none(),
    }
}

/// Reads the document's text; `Err` is the reason it could not be read.
pub async fn extract(path: &Path, limits: &OcrLimits) -> Result<Extraction, String> {
    let deadline = Instant::now() + limits.timeout;
    let mut head = vec![0u8; 512];
    let n = tokio::fs::File::open(path)
        .await
        .map_err(|e| format!("the file cannot be read: {e}"))?
        .read(&mut head)
        .await
        .map_err(|e| format!("the file cannot be read: {e}"))?;
    head.truncate(n);
    let file = path.to_string_lossy().into_owned();
    let (pages, text) = match sniff(&head) {
        Kind::Pdf => pdf(&file, limits, deadline).await?,
        Kind::Image => (1, ocr(None, &file, limits, deadline).await?),
        Kind::Text => {
            let mut bytes = Vec::new();
            tokio::fs::File::open(path)
                .await
                .map_err(|e| format!("the file cannot be read: {e}"))?
                .take(MAX_TEXT_BYTES)
                .read_to_end(&mut bytes)
                .await
                .map_err(|e| format!("the file cannot be read: {e}"))?;
            (1, String::from_utf8_lossy(&bytes).into_owned())
        }
        Kind::Other => (0, String::new()),
    };
    let text = text.trim().to_owned();
    Ok(Extraction {
        pages,
        amounts: amounts(&text),
        dates: dates(&text),
        text,
    })
}

async fn pdf(file: &str, limits: &OcrLimits, deadline: Instant) -> Result<(i64, String), String> {
    let info = run("pdfinfo", &[file], None, limits, deadline).await?;
    let info = String::from_utf8_lossy(&info);
    let pages: u32 = info
        .lines()
        .find_map(|l| l.strip_prefix("Pages:"))
        .and_then(|n| n.trim().parse().ok())
        .ok_or("the PDF's page count cannot be read")?;
    if pages > limits.max_pages {
        return Err(format!(
            "the PDF has {pages} pages; at most {} are read",
            limits.max_pages
        ));
    }
    let mut text = String::new();
    for page in 1..=pages {
        let p = page.to_string();
        let layer = run(
            "pdftotext",
            &["-f", &p, "-l", &p, "-layout", file, "-"],
            None,
            limits,
            deadline,
        )
        .await?;
        let mut page_text = String::from_utf8_lossy(&layer).into_owned();
        if page_text.trim().is_empty() {
            // No text layer: a scan. Render the page and read it.
            let png = run(
                "pdftoppm",
                &[
                    "-f",
                    &p,
                    "-l",
                    &p,
                    "-r",
                    RENDER_DPI,
                    "-png",
                    "-singlefile",
                    file,
                ],
                None,
                limits,
                deadline,
            )
            .await?;
            page_text = ocr(Some(&png), "stdin", limits, deadline).await?;
        }
        text.push_str(page_text.trim_end());
        text.push('\n');
    }
    Ok((i64::from(pages), text))
}

/// Tesseract on a file, or on `input` given through stdin.
async fn ocr(
    input: Option<&[u8]>,
    file: &str,
    limits: &OcrLimits,
    deadline: Instant,
) -> Result<String, String> {
    let out = run("tesseract", &[file, "stdout"], input, limits, deadline).await?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// Runs `program` under the memory limit until the deadline; answers its stdout.
async fn run(
    program: &str,
    args: &[&str],
    input: Option<&[u8]>,
    limits: &OcrLimits,
    deadline: Instant,
) -> Result<Vec<u8>, String> {
    let mut cmd = Command::new("prlimit");
    cmd.arg(format!("--as={}", limits.max_memory_bytes))
        .arg("--")
        .arg(program)
        .args(args)
        // One thread: the stage, not Tesseract, decides how much of the machine OCR takes.
        .env("OMP_THREAD_LIMIT", "1")
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("{program} cannot be started: {e}"))?;
    let stdin = child.stdin.take();
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let stderr = child.stderr.take().ok_or("no stderr")?;
    let work = async {
        let feed = async {
            if let (Some(mut stdin), Some(data)) = (stdin, input) {
                // A tool that stops reading early closes the pipe; its exit status tells.
                let _ = stdin.write_all(data).await;
            }
        };
        let mut out = Vec::new();
        let mut err = Vec::new();
        let mut stdout = stdout.take(MAX_OUTPUT_BYTES);
        let mut stderr = stderr.take(64 * 1024);
        let read_out = stdout.read_to_end(&mut out);
        let read_err = stderr.read_to_end(&mut err);
        let (_, o, e) = tokio::join!(feed, read_out, read_err);
        o.and(e).map_err(|e| format!("{program}: {e}"))?;
        let status = child.wait().await.map_err(|e| format!("{program}: {e}"))?;
        if status.success() {
            Ok(out)
        } else {
            let detail = String::from_utf8_lossy(&err);
            let detail = detail
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("");
            Err(format!(
                "{program} failed ({status}): {}",
                detail.chars().take(200).collect::<String>()
            ))
        }
    };
    let left = deadline.saturating_duration_since(Instant::now());
    match tokio::time::timeout(left, work).await {
        Ok(result) => result,
        // Dropping the future drops the child, which kills it.
        Err(_) => Err(format!(
            "reading the document took longer than {} s",
            limits.timeout.as_secs()
        )),
    }
}

/// Money amounts in the text, in cents: `1,234.56`, `$1234.56`.
pub fn amounts(text: &str) -> Vec<i64> {
    static AMOUNT: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?:^|[^\d.,])(\d{1,3}(?:,\d{3})+|\d+)\.(\d{2})(?:[^\d]|$)").expect("valid")
    });
    AMOUNT
        .captures_iter(text)
        .filter_map(|c| {
            let whole: i64 = c[1].replace(',', "").parse().ok()?;
            let cents: i64 = c[2].parse().ok()?;
            whole.checked_mul(100)?.checked_add(cents)
        })
        .collect()
}

/// Dates in the text, as `YYYY-MM-DD`: ISO dates and US `MM/DD/YYYY`.
pub fn dates(text: &str) -> Vec<String> {
    static ISO: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"\b(\d{4})-(\d{2})-(\d{2})\b").expect("valid"));
    static US: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"\b(\d{2})/(\d{2})/(\d{4})\b").expect("valid"));
    let iso = ISO
        .captures_iter(text)
        .map(|c| format!("{}-{}-{}", &c[1], &c[2], &c[3]));
    let us = US
        .captures_iter(text)
        .map(|c| format!("{}-{}-{}", &c[3], &c[1], &c[2]));
    iso.chain(us)
        .filter(|d| schemas::Date::parse(d).is_some())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_amounts_in_cents() {
        assert_eq!(
            amounts("Total due $1,234.56; copay 20.00, ref 12.345 and 7.5"),
            [123_456, 2_000]
        );
    }

    #[test]
    fn finds_real_dates_only() {
        assert_eq!(
            dates("Service 2026-11-01, billed 12/31/2025, bad 2026-13-40"),
            ["2026-11-01", "2025-12-31"]
        );
    }

    #[test]
    fn tells_documents_by_their_first_bytes() {
        assert_eq!(sniff(b"%PDF-1.7\n"), Kind::Pdf);
        assert_eq!(sniff(b"\x89PNG\r\n\x1a\n...."), Kind::Image);
        assert_eq!(sniff(b"\xff\xd8\xff\xe0"), Kind::Image);
        assert_eq!(sniff(b"plain words"), Kind::Text);
        assert_eq!(sniff(b"\x00\x01\x02\xff\xfe"), Kind::Other);
    }
}
