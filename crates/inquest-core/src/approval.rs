//! Which tool calls a human approves before they run (`[approval]`).
//!
//! A [`Policy`] is a mode and an ordered list of [`Rule`]s. Rules come
//! first, and the first that matches a call decides it: `require`
//! (a human approves it first), `allow` (it runs at once) or `deny` (it
//! never runs; the model is answered with an error result naming the
//! rule). A call no rule matches is decided by the mode: `off` runs
//! everything, `mutating` (the default) holds every call whose side-effect
//! class is not read-only, `all` holds every call. The decision carries
//! the rule that made it, so the turn, the watch event and the audit
//! trail can say why.
//!
//! Pure: a rule is parsed and checked once (a malformed glob or JSON
//! pointer is refused, naming it), then matched against plain data.

use std::fmt;

use serde::Deserialize;

use crate::tools::SideEffect;

/// `[approval] mode`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Every call runs at once (rules still apply).
    Off,
    /// A call whose side-effect class is not read-only waits for a human.
    #[default]
    Mutating,
    /// Every call waits for a human.
    All,
}

/// What a rule does with the calls it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Require,
    Allow,
    Deny,
}

/// How a call is treated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub action: Action,
    /// The rule that decided it (`None`: the mode did).
    pub rule: Option<String>,
}

impl Verdict {
    /// Words for the turn, the watch event and the audit trail, e.g.
    /// `require (rule "restarts")` or `require (mode "mutating")`.
    pub fn reason(&self, mode: Mode) -> String {
        let action = match self.action {
            Action::Require => "require",
            Action::Allow => "allow",
            Action::Deny => "deny",
        };
        match &self.rule {
            Some(rule) => format!("{action} (rule {rule:?})"),
            None => format!("{action} (mode {:?})", mode_name(mode)),
        }
    }
}

fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Off => "off",
        Mode::Mutating => "mutating",
        Mode::All => "all",
    }
}

/// A tool-name pattern: `*` matches any run of characters, `?` any one;
/// every other character matches itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob(String);

impl Glob {
    pub fn parse(text: &str) -> Result<Self, RuleError> {
        let bad = |why: &str| RuleError::Glob {
            glob: text.to_owned(),
            why: why.to_owned(),
        };
        if text.is_empty() {
            return Err(bad("is empty"));
        }
        if let Some(c) = text
            .chars()
            .find(|c| matches!(c, '[' | ']' | '{' | '}' | '\\'))
        {
            return Err(bad(&format!(
                "uses {c:?}: only * and ? are wildcards (character classes, alternatives and escapes are not supported)"
            )));
        }
        if text.chars().any(char::is_control) {
            return Err(bad("holds a control character"));
        }
        Ok(Self(text.to_owned()))
    }

    pub fn matches(&self, name: &str) -> bool {
        let pattern: Vec<char> = self.0.chars().collect();
        let name: Vec<char> = name.chars().collect();
        // Iterative wildcard match with one backtrack point: linear in
        // practice, and never exponential on hostile names.
        let (mut p, mut n) = (0, 0);
        let mut star: Option<(usize, usize)> = None;
        while n < name.len() {
            match pattern.get(p) {
                Some('*') => {
                    star = Some((p, n));
                    p += 1;
                }
                Some(&c) if c == '?' || c == name[n] => {
                    p += 1;
                    n += 1;
                }
                _ => match star {
                    Some((sp, sn)) => {
                        p = sp + 1;
                        n = sn + 1;
                        star = Some((sp, sn + 1));
                    }
                    None => return false,
                },
            }
        }
        pattern[p..].iter().all(|c| *c == '*')
    }
}

impl fmt::Display for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A JSON pointer (RFC 6901): empty, or `/`-separated tokens where `~` is
/// only `~0` or `~1`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pointer(String);

impl Pointer {
    pub fn parse(text: &str) -> Result<Self, RuleError> {
        let bad = |why: &str| RuleError::Pointer {
            pointer: text.to_owned(),
            why: why.to_owned(),
        };
        if !text.is_empty() && !text.starts_with('/') {
            return Err(bad("must be empty or start with '/'"));
        }
        let mut chars = text.chars();
        while let Some(c) = chars.next() {
            if c == '~' && !matches!(chars.next(), Some('0' | '1')) {
                return Err(bad("'~' must be followed by 0 or 1"));
            }
        }
        Ok(Self(text.to_owned()))
    }

    pub fn get<'a>(&self, value: &'a serde_json::Value) -> Option<&'a serde_json::Value> {
        value.pointer(&self.0)
    }
}

/// A condition on one argument of the call.
#[derive(Debug, Clone, PartialEq)]
pub struct ArgumentMatch {
    pub pointer: Pointer,
    pub test: ArgumentTest,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ArgumentTest {
    /// The value there equals this one.
    Equals(serde_json::Value),
    /// The value there is a string starting with this.
    Prefix(String),
}

impl ArgumentMatch {
    fn holds(&self, arguments: &serde_json::Value) -> bool {
        match (self.pointer.get(arguments), &self.test) {
            (Some(v), ArgumentTest::Equals(want)) => v == want,
            (Some(serde_json::Value::String(s)), ArgumentTest::Prefix(p)) => s.starts_with(p),
            _ => false,
        }
    }
}

/// One `[[approval.rules]]` entry, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// What the turn and the audit trail call it (its `name`, else its
    /// position, `rules[2]`).
    pub name: String,
    /// Only calls to this MCP server (`None`: any).
    pub server: Option<String>,
    pub tool: Glob,
    /// Every one must hold.
    pub arguments: Vec<ArgumentMatch>,
    pub action: Action,
}

impl Rule {
    fn matches(&self, call: &Call<'_>) -> bool {
        self.server.as_deref().is_none_or(|s| s == call.server)
            && self.tool.matches(call.tool)
            && self.arguments.iter().all(|a| a.holds(call.arguments))
    }
}

/// What the policy looks at in a call.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    pub server: &'a str,
    pub tool: &'a str,
    pub arguments: &'a serde_json::Value,
    pub side_effect: SideEffect,
}

/// A mode and its rules.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Policy {
    pub mode: Mode,
    pub rules: Vec<Rule>,
}

impl Policy {
    /// How `call` is treated: by the first rule that matches, else by the
    /// mode.
    pub fn decide(&self, call: &Call<'_>) -> Verdict {
        if let Some(rule) = self.rules.iter().find(|r| r.matches(call)) {
            return Verdict {
                action: rule.action,
                rule: Some(rule.name.clone()),
            };
        }
        let held = match self.mode {
            Mode::Off => false,
            Mode::Mutating => call.side_effect != SideEffect::ReadOnly,
            Mode::All => true,
        };
        Verdict {
            action: if held { Action::Require } else { Action::Allow },
            rule: None,
        }
    }
}

/// Where one approval request stands. Every state but `Pending` is final.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ApprovalState {
    Pending,
    Approved,
    Denied,
    /// Still pending at its expiry: denied as expired.
    Expired,
    /// A follow-up message arrived while it was pending.
    Superseded,
    /// The session was cancelled while it was pending.
    Cancelled,
}

impl ApprovalState {
    pub const ALL: [ApprovalState; 6] = [
        ApprovalState::Pending,
        ApprovalState::Approved,
        ApprovalState::Denied,
        ApprovalState::Expired,
        ApprovalState::Superseded,
        ApprovalState::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalState::Pending => "pending",
            ApprovalState::Approved => "approved",
            ApprovalState::Denied => "denied",
            ApprovalState::Expired => "expired",
            ApprovalState::Superseded => "superseded",
            ApprovalState::Cancelled => "cancelled",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// The call may run (once).
    pub fn runs(self) -> bool {
        self == ApprovalState::Approved
    }
}

impl fmt::Display for ApprovalState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The policy a session's bursts run under (its tenant's), and how long a
/// held call waits for a human before it is denied as expired.
#[derive(Debug, Clone, PartialEq)]
pub struct Gate {
    pub policy: Policy,
    pub timeout: std::time::Duration,
}

impl Gate {
    /// The default: `mode = "mutating"`, no rules, 24 hours.
    pub const DEFAULT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

    /// How `call` is treated, and the words that say why.
    pub fn decide(&self, call: &Call<'_>) -> (Verdict, String) {
        let verdict = self.policy.decide(call);
        let reason = verdict.reason(self.policy.mode);
        (verdict, reason)
    }
}

impl Default for Gate {
    fn default() -> Self {
        Self {
            policy: Policy::default(),
            timeout: Self::DEFAULT_TIMEOUT,
        }
    }
}

/// How a pending call is decided: by a human, or by the system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Approve {
        by: String,
        comment: String,
    },
    Deny {
        by: String,
        comment: String,
    },
    /// Still pending at its expiry (`approval.timeout`).
    Expire,
    /// A follow-up message arrived first.
    Supersede,
}

/// Who the system's own decisions are recorded as.
pub const SYSTEM: &str = "system";

impl Decision {
    pub fn state(&self) -> ApprovalState {
        match self {
            Decision::Approve { .. } => ApprovalState::Approved,
            Decision::Deny { .. } => ApprovalState::Denied,
            Decision::Expire => ApprovalState::Expired,
            Decision::Supersede => ApprovalState::Superseded,
        }
    }

    pub fn by(&self) -> &str {
        match self {
            Decision::Approve { by, .. } | Decision::Deny { by, .. } => by,
            Decision::Expire | Decision::Supersede => SYSTEM,
        }
    }

    pub fn comment(&self) -> &str {
        match self {
            Decision::Approve { comment, .. } | Decision::Deny { comment, .. } => comment,
            Decision::Expire | Decision::Supersede => "",
        }
    }

    /// The error result the model is given for a call this decision does
    /// not let run; `None` for an approval (the call runs and its real
    /// result is stored).
    pub fn refusal(&self) -> Option<String> {
        match self {
            Decision::Approve { .. } => None,
            Decision::Deny { by, comment } if comment.is_empty() => Some(format!("denied by {by}")),
            Decision::Deny { by, comment } => Some(format!("denied by {by}: {comment}")),
            Decision::Expire => Some(
                "denied: expired (no human decided within approval.timeout); the call did not run"
                    .to_owned(),
            ),
            Decision::Supersede => {
                Some("denied: superseded by a new message; the call did not run".to_owned())
            }
        }
    }
}

/// The error result of a call a `deny` rule refused; `reason` names the
/// rule ([`Verdict::reason`]).
pub fn denied_by_rule(reason: &str) -> String {
    format!("denied by the approval policy: {reason}; the call did not run")
}

/// The longest comment a decision takes, in bytes.
pub const MAX_COMMENT_BYTES: usize = 4096;

/// A rule that cannot be used, naming what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    #[error("tool glob {glob:?} {why}")]
    Glob { glob: String, why: String },
    #[error("argument pointer {pointer:?} {why}")]
    Pointer { pointer: String, why: String },
    #[error("argument {pointer:?} needs exactly one of `equals` and `prefix`")]
    Test { pointer: String },
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn call<'a>(
        server: &'a str,
        tool: &'a str,
        arguments: &'a serde_json::Value,
        side_effect: SideEffect,
    ) -> Call<'a> {
        Call {
            server,
            tool,
            arguments,
            side_effect,
        }
    }

    fn rule(name: &str, tool: &str, action: Action) -> Rule {
        Rule {
            name: name.into(),
            server: None,
            tool: Glob::parse(tool).unwrap(),
            arguments: vec![],
            action,
        }
    }

    #[test]
    fn the_mode_decides_what_no_rule_matches() {
        let args = json!({});
        let policy = |mode| Policy {
            mode,
            rules: vec![],
        };
        for (mode, effect, held) in [
            (Mode::Off, SideEffect::Mutating, false),
            (Mode::Mutating, SideEffect::ReadOnly, false),
            (Mode::Mutating, SideEffect::Idempotent, true),
            (Mode::Mutating, SideEffect::Mutating, true),
            (Mode::All, SideEffect::ReadOnly, true),
        ] {
            let v = policy(mode).decide(&call("k8s", "get", &args, effect));
            assert_eq!(v.action == Action::Require, held, "{mode:?} {effect:?}");
            assert_eq!(v.rule, None);
        }
    }

    #[test]
    fn the_first_matching_rule_wins_and_names_itself() {
        let args = json!({"namespace": "prod-eu", "replicas": 3});
        let mut scoped = rule("prod scale", "scale_*", Action::Require);
        scoped.server = Some("k8s".into());
        scoped.arguments = vec![ArgumentMatch {
            pointer: Pointer::parse("/namespace").unwrap(),
            test: ArgumentTest::Prefix("prod".into()),
        }];
        let policy = Policy {
            mode: Mode::Off,
            rules: vec![
                scoped,
                rule("no deletes", "*delete*", Action::Deny),
                rule("scaling elsewhere", "scale_*", Action::Allow),
            ],
        };
        let v = policy.decide(&call(
            "k8s",
            "scale_deployment",
            &args,
            SideEffect::Mutating,
        ));
        assert_eq!(v.action, Action::Require);
        assert_eq!(v.reason(Mode::Off), "require (rule \"prod scale\")");
        let staging = json!({"namespace": "staging"});
        let v = policy.decide(&call(
            "k8s",
            "scale_deployment",
            &staging,
            SideEffect::Mutating,
        ));
        assert_eq!(v.rule.as_deref(), Some("scaling elsewhere"));
        let v = policy.decide(&call("db", "scale_deployment", &args, SideEffect::Mutating));
        assert_eq!(
            v.rule.as_deref(),
            Some("scaling elsewhere"),
            "another server"
        );
        let v = policy.decide(&call("k8s", "kubectl_delete", &args, SideEffect::ReadOnly));
        assert_eq!(v.action, Action::Deny, "a deny rule beats a read-only hint");
    }

    #[test]
    fn argument_tests_compare_the_value_at_the_pointer() {
        let args = json!({"a": {"b/c": [1, "x"]}, "flag": true});
        let m = |p: &str, test| ArgumentMatch {
            pointer: Pointer::parse(p).unwrap(),
            test,
        };
        assert!(m("/flag", ArgumentTest::Equals(json!(true))).holds(&args));
        assert!(m("/a/b~1c/0", ArgumentTest::Equals(json!(1))).holds(&args));
        assert!(m("/a/b~1c/1", ArgumentTest::Prefix("x".into())).holds(&args));
        assert!(
            !m("/a/b~1c/0", ArgumentTest::Prefix("1".into())).holds(&args),
            "not a string"
        );
        assert!(!m("/missing", ArgumentTest::Equals(json!(null))).holds(&args));
    }

    #[test]
    fn malformed_globs_and_pointers_are_refused_by_name() {
        for bad in ["", "restart_[ab]", "a{b,c}", "x\\*"] {
            let e = Glob::parse(bad).unwrap_err();
            assert!(e.to_string().contains(&format!("{bad:?}")), "{e}");
        }
        for bad in ["namespace", "/a~2", "/a~"] {
            let e = Pointer::parse(bad).unwrap_err();
            assert!(e.to_string().contains(&format!("{bad:?}")), "{e}");
        }
        assert!(Pointer::parse("").is_ok());
        assert!(Pointer::parse("/a~0b/~1").is_ok());
    }

    /// A reference matcher: the glob as a regular language, by recursion.
    fn reference(p: &[char], n: &[char]) -> bool {
        match p.split_first() {
            None => n.is_empty(),
            Some(('*', rest)) => (0..=n.len()).any(|i| reference(rest, &n[i..])),
            Some((c, rest)) => {
                n.first().is_some_and(|f| *c == '?' || c == f) && reference(rest, &n[1..])
            }
        }
    }

    proptest! {
        #[test]
        fn the_glob_matcher_agrees_with_the_reference(
            pattern in "[ab*?]{1,8}",
            name in "[ab]{0,10}",
        ) {
            let glob = Glob::parse(&pattern).unwrap();
            let p: Vec<char> = pattern.chars().collect();
            let n: Vec<char> = name.chars().collect();
            prop_assert_eq!(glob.matches(&name), reference(&p, &n));
        }
    }
}
