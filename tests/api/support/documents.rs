//! Documents made by the tests: a PDF with a text layer, written by hand, and a PNG of
//! its first page rendered by poppler's `pdftoppm` (a scan, to Tesseract).

/// A PDF of one page per entry, each showing its lines in Helvetica.
pub fn pdf(pages: &[&[&str]]) -> Vec<u8> {
    let n = pages.len();
    // Objects: 1 catalog, 2 pages, 3 font, then a page and its contents per page.
    let mut objects = vec![
        "<< /Type /Catalog /Pages 2 0 R >>".to_owned(),
        format!(
            "<< /Type /Pages /Kids [{}] /Count {n} >>",
            (0..n)
                .map(|i| format!("{} 0 R", 4 + 2 * i))
                .collect::<Vec<_>>()
                .join(" ")
        ),
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".to_owned(),
    ];
    for (i, lines) in pages.iter().enumerate() {
        let shown: String = lines.iter().map(|l| format!("({l}) ' ")).collect();
        let content = format!("BT /F1 24 Tf 72 700 Td 30 TL {shown}ET");
        objects.push(format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] \
             /Resources << /Font << /F1 3 0 R >> >> /Contents {} 0 R >>",
            5 + 2 * i
        ));
        objects.push(format!(
            "<< /Length {} >>\nstream\n{content}\nendstream",
            content.len()
        ));
    }
    let mut out = String::from("%PDF-1.4\n");
    let mut offsets = Vec::new();
    for (i, o) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.push_str(&format!("{} 0 obj\n{o}\nendobj\n", i + 1));
    }
    let xref = out.len();
    out.push_str(&format!(
        "xref\n0 {}\n0000000000 65535 f \n",
        objects.len() + 1
    ));
    for off in offsets {
        out.push_str(&format!("{off:010} 00000 n \n"));
    }
    out.push_str(&format!(
        "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
        objects.len() + 1
    ));
    out.into_bytes()
}

/// The first page of `pdf` rendered by `pdftoppm` with these options.
fn render(pdf: &[u8], options: &[&str]) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("page.pdf");
    std::fs::write(&file, pdf).unwrap();
    let out = std::process::Command::new("pdftoppm")
        .args(["-f", "1", "-l", "1", "-singlefile"])
        .args(options)
        .arg(&file)
        .output()
        .expect("pdftoppm (poppler-utils; scripts/test installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// The first page of `pdf` as a PNG at 150 dpi.
pub fn png_of(pdf: &[u8]) -> Vec<u8> {
    render(pdf, &["-r", "150", "-png"])
}

/// The first page of `pdf` as a scanned PDF: one page holding only its picture (grey,
/// 150 dpi), no text layer.
pub fn scanned_pdf_of(pdf: &[u8]) -> Vec<u8> {
    let pgm = render(pdf, &["-r", "150", "-gray"]);
    // A binary PGM: "P5\n<width> <height>\n255\n", then one byte per pixel.
    let mut fields = Vec::new();
    let mut at = 0;
    while fields.len() < 4 {
        let end = at
            + pgm[at..]
                .iter()
                .position(|b| b.is_ascii_whitespace())
                .unwrap();
        fields.push(String::from_utf8(pgm[at..end].to_vec()).unwrap());
        at = end + 1;
    }
    assert_eq!(fields[0], "P5");
    let (w, h): (usize, usize) = (fields[1].parse().unwrap(), fields[2].parse().unwrap());
    let pixels = &pgm[at..at + w * h];
    let content = b"q 612 0 0 792 0 0 cm /Im1 Do Q";
    let objects: [(String, Option<&[u8]>); 5] = [
        ("<< /Type /Catalog /Pages 2 0 R >>".into(), None),
        ("<< /Type /Pages /Kids [3 0 R] /Count 1 >>".into(), None),
        (
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] \
             /Resources << /XObject << /Im1 5 0 R >> >> /Contents 4 0 R >>"
                .into(),
            None,
        ),
        (format!("<< /Length {} >>", content.len()), Some(content)),
        (
            format!(
                "<< /Type /XObject /Subtype /Image /Width {w} /Height {h} \
                 /ColorSpace /DeviceGray /BitsPerComponent 8 /Length {} >>",
                pixels.len()
            ),
            Some(pixels),
        ),
    ];
    let mut out: Vec<u8> = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (i, (head, stream)) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n{head}\n", i + 1).as_bytes());
        if let Some(data) = stream {
            out.extend_from_slice(b"stream\n");
            out.extend_from_slice(data);
            out.extend_from_slice(b"\nendstream\n");
        }
        out.extend_from_slice(b"endobj\n");
    }
    let xref = out.len();
    out.extend_from_slice(b"xref\n0 6\n0000000000 65535 f \n");
    for off in offsets {
        out.extend_from_slice(format!("{off:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!("trailer\n<< /Size 6 /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n").as_bytes(),
    );
    out
}
