//! The command line, read as libtest reads it. libtest-mimic takes one
//! filter; libtest takes several (a trial runs when it matches any), so the
//! filters are taken out before libtest-mimic parses the rest.

use libtest_mimic::{Arguments, Trial};
use std::ffi::OsString;

/// libtest options followed by a value in the next argument.
const WITH_VALUE: [&str; 6] = [
    "--test-threads",
    "--logfile",
    "--skip",
    "--color",
    "--format",
    "-Z",
];

/// The parsed command line: libtest-mimic's arguments (without a filter)
/// and every filter given.
pub struct Cli {
    pub args: Arguments,
    pub filters: Vec<String>,
}

impl Cli {
    pub fn from_env() -> Cli {
        Cli::parse(std::env::args_os())
    }

    pub fn parse(argv: impl IntoIterator<Item = OsString>) -> Cli {
        let mut argv = argv.into_iter();
        let mut rest: Vec<OsString> = argv.next().into_iter().collect();
        let mut filters = Vec::new();
        let mut after_dashes = false;
        while let Some(a) = argv.next() {
            let text = a.to_string_lossy().into_owned();
            if after_dashes || !text.starts_with('-') {
                filters.push(text);
            } else if text == "--" {
                after_dashes = true;
            } else {
                let takes_value = WITH_VALUE.contains(&text.as_str());
                rest.push(a);
                if takes_value {
                    rest.extend(argv.next());
                }
            }
        }
        let args = Arguments::from_iter(rest);
        Cli { args, filters }
    }

    /// Whether the run covers every trial (no filter, nothing skipped, not
    /// a listing, not only the ignored ones).
    pub fn is_complete(&self) -> bool {
        self.filters.is_empty()
            && self.args.skip.is_empty()
            && !self.args.list
            && !self.args.ignored
    }

    /// The trial names the filters name exactly, when the run is `--exact`
    /// (as cargo-nextest runs each trial).
    pub fn exact_names(&self) -> Option<&[String]> {
        (self.args.exact && !self.filters.is_empty() && !self.args.list)
            .then_some(self.filters.as_slice())
    }

    /// Keeps the trials that match a filter, as libtest does: by substring,
    /// or whole name with `--exact`. One filter is left to libtest-mimic,
    /// so that it reports how many it filtered out.
    pub fn select(&mut self, trials: Vec<Trial>) -> Vec<Trial> {
        match self.filters.len() {
            0 => trials,
            1 => {
                self.args.filter = self.filters.first().cloned();
                trials
            }
            _ => trials
                .into_iter()
                .filter(|t| self.filters.iter().any(|f| self.matches(f, t.name())))
                .collect(),
        }
    }

    fn matches(&self, filter: &str, name: &str) -> bool {
        if self.args.exact {
            name == filter
        } else {
            name.contains(filter)
        }
    }
}

// The conformance target compiles with cfg(test) but without libtest, so
// these tests run from the harness-unit target.
#[cfg(test)]
#[allow(dead_code)]
mod tests {
    use super::*;

    fn parse(words: &[&str]) -> Cli {
        Cli::parse(
            std::iter::once("conformance")
                .chain(words.iter().copied())
                .map(OsString::from),
        )
    }

    #[test]
    fn several_filters_and_options_with_values() {
        let cli = parse(&[
            "a",
            "--skip",
            "x",
            "b",
            "--test-threads",
            "1",
            "--exact",
            "--format",
            "terse",
            "c",
        ]);
        assert_eq!(cli.filters, ["a", "b", "c"]);
        assert_eq!(cli.args.skip, ["x"]);
        assert_eq!(cli.args.test_threads, Some(1));
        assert!(cli.args.exact);
        assert!(!cli.is_complete());
        assert_eq!(cli.exact_names().map(<[String]>::len), Some(3));
    }

    #[test]
    fn a_plain_run_is_complete_and_a_listing_is_not() {
        assert!(parse(&[]).is_complete());
        assert!(parse(&["--include-ignored"]).is_complete());
        assert!(!parse(&["--list"]).is_complete());
        assert!(!parse(&["--ignored"]).is_complete());
        assert!(parse(&["--list", "--exact", "a"]).exact_names().is_none());
        assert!(parse(&["a"]).exact_names().is_none());
    }

    #[test]
    fn select_matches_any_filter() {
        let trials = || {
            ["node/a", "node/ab", "seed/c"]
                .into_iter()
                .map(|n| Trial::test(n, || Ok(())))
                .collect::<Vec<_>>()
        };
        let names = |t: Vec<Trial>| t.iter().map(|t| t.name().to_string()).collect::<Vec<_>>();
        assert_eq!(
            names(parse(&["node/a", "seed"]).select(trials())),
            ["node/a", "node/ab", "seed/c"]
        );
        assert_eq!(
            names(parse(&["--exact", "node/a", "seed/c"]).select(trials())),
            ["node/a", "seed/c"]
        );
        let mut one = parse(&["ab"]);
        assert_eq!(one.select(trials()).len(), 3, "left to libtest-mimic");
        assert_eq!(one.args.filter.as_deref(), Some("ab"));
    }
}
