//! One chart as inline SVG (plotters' SVG backend): lines, dots and shaded windows on linear or
//! log axes. The chart only draws the numbers it is given.

use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::Shift;
use plotters::prelude::*;

/// Chart size, px: two fit side by side on the page.
pub const SIZE: (u32, u32) = (600, 270);

/// The colours of the series, in order (distinguishable, and readable on white).
pub const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
];

/// One series: a label (for the legend the page draws) and its points, in segments (a gap in
/// the data is a gap in the line, not a line across it).
#[derive(Debug, Clone)]
pub struct Line {
    /// The legend's text.
    pub label: String,
    /// Its colour.
    pub color: RGBColor,
    /// Runs of consecutive points (x, y).
    pub segments: Vec<Vec<(f64, f64)>>,
    /// Draw the points as dots instead of a line.
    pub dots: bool,
}

impl Line {
    /// A line through `points`, broken where a point is `None`.
    pub fn from_points(
        label: impl Into<String>,
        color: RGBColor,
        points: impl IntoIterator<Item = Option<(f64, f64)>>,
    ) -> Line {
        let mut segments = vec![Vec::new()];
        for p in points {
            match p {
                Some(p) if p.0.is_finite() && p.1.is_finite() => segments.last_mut().expect("one").push(p),
                _ => segments.push(Vec::new()),
            }
        }
        segments.retain(|s| !s.is_empty());
        Line { label: label.into(), color, segments, dots: false }
    }

    /// Dots at `points`.
    pub fn dots(label: impl Into<String>, color: RGBColor, points: Vec<(f64, f64)>) -> Line {
        Line { label: label.into(), color, segments: vec![points], dots: true }
    }

    fn points(&self) -> impl Iterator<Item = &(f64, f64)> {
        self.segments.iter().flatten()
    }
}

/// What the x axis shows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum XAxis {
    /// Seconds since the run start, linear, over (from, to).
    Time(f64, f64),
    /// 1/(1−p), log, labelled as percentiles (HdrHistogram's plotter).
    Percentile,
    /// Repetitions 1..=n of a comparison, linear.
    Repetition(usize),
    /// A rate per second, linear, over (from, to), with the axis' description: a capacity
    /// search's throughput (`jobs finished per second`, `enqueues sent per second`).
    Throughput(f64, f64, &'static str),
}

/// A chart to draw.
pub struct Chart<'a> {
    /// The y axis' description, with its unit.
    pub y_label: &'a str,
    /// The x axis.
    pub x: XAxis,
    /// A log y axis (values ≤ 0 are left out).
    pub log_y: bool,
    /// The series.
    pub lines: Vec<Line>,
    /// Windows (from, to) on the x axis shaded red: the faults.
    pub shade: &'a [(f64, f64)],
}

impl Chart<'_> {
    /// True when some series has a point to draw.
    pub fn has_data(&self) -> bool {
        self.lines.iter().any(|l| l.points().any(|p| !self.log_y || p.1 > 0.0))
    }

    /// The chart as an `<svg>` element (no XML namespace URL: inline SVG in HTML needs none,
    /// and the page holds no URL at all).
    pub fn render(&self) -> String {
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
            let _ = root.fill(&WHITE);
            let ys: Vec<f64> =
                self.lines.iter().flat_map(|l| l.points().map(|p| p.1)).filter(|y| !self.log_y || *y > 0.0).collect();
            let (lo, hi) = ys.iter().fold((f64::MAX, f64::MIN), |(lo, hi), y| (lo.min(*y), hi.max(*y)));
            let xs = || self.lines.iter().flat_map(|l| l.points().map(|p| p.0));
            let result = match (self.x, self.log_y) {
                (XAxis::Time(a, b), false) => self.draw(&root, a..b.max(a + 1.0), 0.0..(hi * 1.1).max(1e-9)),
                (XAxis::Time(a, b), true) => self.draw(&root, a..b.max(a + 1.0), log_range(lo, hi).log_scale()),
                (XAxis::Throughput(a, b, _), false) => self.draw(&root, a..b.max(a + 1.0), 0.0..(hi * 1.1).max(1e-9)),
                (XAxis::Throughput(a, b, _), true) => {
                    self.draw(&root, a..b.max(a + 1.0), log_range(lo, hi).log_scale())
                }
                (XAxis::Repetition(n), false) => self.draw(&root, 0.5..n as f64 + 0.5, 0.0..(hi * 1.1).max(1e-9)),
                (XAxis::Repetition(n), true) => self.draw(&root, 0.5..n as f64 + 0.5, log_range(lo, hi).log_scale()),
                (XAxis::Percentile, log) => {
                    let right = xs().fold(10.0_f64, f64::max) * 1.5;
                    if log {
                        self.draw(&root, (1.0..right).log_scale(), log_range(lo, hi).log_scale())
                    } else {
                        self.draw(&root, (1.0..right).log_scale(), 0.0..(hi * 1.1).max(1e-9))
                    }
                }
            };
            let _ = result.and_then(|()| root.present());
        }
        svg.replace(r#" xmlns="http://www.w3.org/2000/svg""#, "")
    }

    fn draw<X, Y>(
        &self,
        root: &DrawingArea<SVGBackend, Shift>,
        x: X,
        y: Y,
    ) -> Result<(), DrawingAreaErrorKind<std::io::Error>>
    where
        X: AsRangedCoord<Value = f64>,
        Y: AsRangedCoord<Value = f64>,
        X::CoordDescType: ValueFormatter<f64>,
        Y::CoordDescType: ValueFormatter<f64>,
    {
        let mut chart =
            ChartBuilder::on(root).margin(10).x_label_area_size(36).y_label_area_size(64).build_cartesian_2d(x, y)?;
        let percentile = self.x == XAxis::Percentile;
        let x_desc = match self.x {
            XAxis::Percentile => "percentile (1/(1-p), log)",
            XAxis::Time(..) => "s since the run start",
            XAxis::Repetition(_) => "repetition",
            XAxis::Throughput(.., desc) => desc,
        };
        // A rate axis labels with `short`: a narrow range keeps its decimals (0.25, 0.5, not 0 0 1).
        let rate = matches!(self.x, XAxis::Throughput(..));
        let x_fmt = move |v: &f64| {
            if percentile {
                percentile_label(*v)
            } else if rate {
                short(*v)
            } else {
                format!("{v:.0}")
            }
        };
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(self.y_label)
            .x_labels(if let XAxis::Repetition(n) = self.x { n.clamp(1, 10) } else { 8 })
            .y_labels(6)
            .x_label_formatter(&x_fmt)
            .y_label_formatter(&|v: &f64| short(*v))
            .label_style(("sans-serif", 12))
            .axis_desc_style(("sans-serif", 13))
            // One light line between two labels: plotters asks for up to labels x this many
            // light points (1 puts them under the labels' own lines). Its default of 10 makes
            // light lines the bulk of a chart's SVG and a large share of writing report.html.
            .max_light_lines(2)
            .light_line_style(RGBColor(240, 240, 240))
            .bold_line_style(RGBColor(215, 215, 215))
            .draw()?;
        let (y0, y1) = (chart.y_range().start, chart.y_range().end);
        for &(a, b) in self.shade {
            // An instant fault is still a visible band.
            let b = if b - a < 0.2 { a + 0.2 } else { b };
            chart.draw_series(std::iter::once(Rectangle::new([(a, y0), (b, y1)], RED.mix(0.15).filled())))?;
        }
        for line in &self.lines {
            let keep = |p: &&(f64, f64)| !self.log_y || p.1 > 0.0;
            if line.dots {
                chart.draw_series(line.points().filter(keep).map(|p| Circle::new(*p, 3, line.color.filled())))?;
            } else {
                for seg in &line.segments {
                    let pts: Vec<(f64, f64)> = seg.iter().filter(keep).copied().collect();
                    if pts.len() == 1 {
                        chart.draw_series(std::iter::once(Circle::new(pts[0], 2, line.color.filled())))?;
                    }
                    chart.draw_series(LineSeries::new(pts, line.color.stroke_width(2)))?;
                }
            }
        }
        Ok(())
    }
}

/// A log range around (lo, hi), a little wider so the extremes do not sit on the frame.
fn log_range(lo: f64, hi: f64) -> std::ops::Range<f64> {
    let (lo, hi) = if lo > 0.0 && hi >= lo { (lo, hi) } else { (0.001, 1.0) };
    lo / 1.6..(hi * 1.6).max(lo * 10.0)
}

/// 1/(1−p) as the percentile it stands for: 2 → `50%`, 1000 → `99.9%`.
pub fn percentile_label(x: f64) -> String {
    if x <= 1.0 {
        return "0%".into();
    }
    let p = 100.0 * (1.0 - 1.0 / x);
    let decimals = (x.log10() - 2.0).ceil().max(0.0) as usize;
    format!("{p:.decimals$}%")
}

/// A number for an axis label: `0.05`, `1.5`, `250`, `12k`, `3.4M`.
pub fn short(v: f64) -> String {
    let a = v.abs();
    let trim = |s: String| if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_string() } else { s };
    if a >= 1e9 {
        trim(format!("{:.1}", v / 1e9)) + "G"
    } else if a >= 1e6 {
        trim(format!("{:.1}", v / 1e6)) + "M"
    } else if a >= 1e4 {
        trim(format!("{:.1}", v / 1e3)) + "k"
    } else if a >= 10.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        trim(format!("{v:.1}"))
    } else {
        let digits = (-a.log10()).ceil() as usize + 1;
        trim(format!("{v:.digits$}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_read_as_a_person_writes_them() {
        assert_eq!(percentile_label(2.0), "50%");
        assert_eq!(percentile_label(100.0), "99%");
        assert_eq!(percentile_label(1000.0), "99.9%");
        assert_eq!(percentile_label(1e5), "99.999%");
        assert_eq!(
            (short(0.05), short(1.5), short(250.0), short(12_000.0), short(3_400_000.0)),
            ("0.05".into(), "1.5".into(), "250".into(), "12k".into(), "3.4M".into())
        );
    }

    #[test]
    fn a_chart_is_svg_without_any_url() {
        let line = Line::from_points("a", PALETTE[0], [Some((0.0, 1.0)), Some((1.0, 2.0)), None, Some((3.0, 1.0))]);
        assert_eq!(line.segments.len(), 2);
        let chart =
            Chart { y_label: "ms", x: XAxis::Time(0.0, 4.0), log_y: true, lines: vec![line], shade: &[(1.0, 2.0)] };
        assert!(chart.has_data());
        let svg = chart.render();
        assert!(svg.starts_with("<svg") && svg.contains("<polyline"), "{svg}");
        assert!(!svg.contains("http"), "{svg}");
    }
}
