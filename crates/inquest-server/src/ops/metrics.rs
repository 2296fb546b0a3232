//! What every metric means, said once for the whole process, and the
//! series that start at zero.
//!
//! Each metric the crates record (`metrics::counter!` and friends, in the
//! engine, the store, the agent and here) gets a `# HELP` line from
//! [`describe`]. Counters whose label values are known in advance are
//! registered at 0 there too: a counter that first appears on its first
//! increment makes `rate()` and `increase()` miss that increment and
//! leaves an alert such as "no burst ended in 10 minutes" with nothing to
//! compare until something has gone wrong. Labels that depend on the
//! configuration or the traffic (provider names, tools, RPC codes other
//! than OK, store operations) are described but appear with their first
//! use. `crates/inquest/tests/metrics.rs` checks that every metric named
//! in the sources has a `# HELP` line on a fresh server's `/metrics`.

use inquest_core::ExitReason;
use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};

/// A counter registered at 0 for each of its label's values, or, with no
/// label, once.
struct Zeroed {
    name: &'static str,
    label: Option<(&'static str, &'static [&'static str])>,
}

/// The counters every replica exports from its start. The burst modes
/// and recovery kinds are `inquest_engine::resume::Mode::as_str` and
/// `inquest_core::RecoveryKind::as_str`; the causes and reasons are the
/// literals at their `counter!` calls.
const ZEROED: &[Zeroed] = &[
    Zeroed {
        name: "inquest_bursts_started_total",
        label: Some(("mode", &["fresh", "confirmed", "recovered"])),
    },
    Zeroed {
        name: "inquest_lease_claims_total",
        label: Some(("mode", &["fresh", "confirmed", "recovered"])),
    },
    Zeroed {
        name: "inquest_bursts_deferred_total",
        label: None,
    },
    Zeroed {
        name: "inquest_lease_renewals_failed_total",
        label: None,
    },
    Zeroed {
        name: "inquest_leases_lost_total",
        label: Some(("why", &["taken_over", "deadline"])),
    },
    Zeroed {
        name: "inquest_orphans_recovered_total",
        label: Some(("by", &["reaper", "access"])),
    },
    Zeroed {
        name: "inquest_erased_sessions_total",
        label: Some(("via", &["api", "retention"])),
    },
    Zeroed {
        name: "inquest_retention_removed_total",
        label: Some(("what", &["incidents", "audit_events", "turn_partitions"])),
    },
    Zeroed {
        name: "inquest_retention_passes_total",
        label: None,
    },
    Zeroed {
        name: "inquest_interrupts_total",
        label: Some(("via", &["local", "elsewhere", "feed", "renewal", "claim"])),
    },
    Zeroed {
        name: "inquest_orphan_recoveries_total",
        label: Some((
            "kind",
            &[
                "clean",
                "interrupted_prompt",
                "interrupted_turn",
                "degraded_history",
            ],
        )),
    },
    Zeroed {
        name: "inquest_feed_notifications_total",
        label: None,
    },
    Zeroed {
        name: "inquest_webhook_attempts_total",
        label: Some(("outcome", &["delivered", "failed"])),
    },
    Zeroed {
        name: "inquest_webhook_deliveries_total",
        label: Some(("outcome", &["delivered", "gave_up"])),
    },
    Zeroed {
        name: "inquest_webhooks_disabled_total",
        label: None,
    },
    Zeroed {
        name: "inquest_feed_resyncs_total",
        label: Some(("cause", &["queue_full", "lost", "listening"])),
    },
    Zeroed {
        name: "inquest_health_probes_total",
        label: None,
    },
    Zeroed {
        name: "inquest_connections_refused_total",
        label: Some((
            "why",
            &["accept_error", "max_connections", "preface_timeout"],
        )),
    },
    Zeroed {
        name: "inquest_requests_refused_total",
        label: Some(("why", &["host"])),
    },
    Zeroed {
        name: "inquest_auth_failures_total",
        label: Some(("why", &["refused", "throttled", "store_unavailable"])),
    },
    Zeroed {
        name: "inquest_connections_closed_total",
        label: Some(("why", &["idle"])),
    },
    Zeroed {
        name: "inquest_watch_streams_opened_total",
        label: None,
    },
    Zeroed {
        name: "inquest_alert_notifications_total",
        label: Some((
            "outcome",
            &[
                "created",
                "updated",
                "unchanged",
                "refused",
                "unavailable",
                "failed",
            ],
        )),
    },
    Zeroed {
        name: "inquest_alert_sessions_started_total",
        label: None,
    },
    Zeroed {
        name: "inquest_approvals_requested_total",
        label: None,
    },
    Zeroed {
        name: "inquest_approvals_decided_total",
        label: Some(("outcome", &["approved", "denied", "expired"])),
    },
    Zeroed {
        name: "inquest_approvals_denied_by_rule_total",
        label: None,
    },
    Zeroed {
        name: "inquest_alert_sessions_capped_total",
        label: None,
    },
    Zeroed {
        name: "inquest_turns_lost_in_failover_total",
        label: None,
    },
    Zeroed {
        name: "inquest_schedule_ticks_total",
        label: Some(("outcome", &["fired", "skipped"])),
    },
    Zeroed {
        name: "inquest_alert_follow_ups_total",
        label: Some(("outcome", &["sent", "ended"])),
    },
    Zeroed {
        name: "inquest_alert_notices_total",
        label: Some(("why", &["resolved"])),
    },
    Zeroed {
        name: "inquest_watch_lagged_total",
        label: None,
    },
    Zeroed {
        name: "inquest_watch_events_dropped_total",
        label: None,
    },
];

/// Describes every metric and registers [`ZEROED`] (and bursts ended, by
/// every exit reason, and every RPC method's OK calls) at 0. Call once, after the recorder is installed.
pub fn describe() {
    describe_counters();
    describe_gauges();
    describe_histograms();
    for zeroed in ZEROED {
        match zeroed.label {
            None => metrics::counter!(zeroed.name).increment(0),
            Some((label, values)) => {
                for value in values {
                    metrics::counter!(zeroed.name, label => *value).increment(0);
                }
            }
        }
    }
    // The webhook queue gauges are set every few seconds; from the start a
    // replica with nothing to deliver shows an empty queue, not no series.
    metrics::gauge!("inquest_webhook_queue_depth").set(0.0);
    metrics::gauge!("inquest_webhook_oldest_undelivered_seconds").set(0.0);
    for exit in ExitReason::ALL {
        metrics::counter!("inquest_bursts_ended_total", "exit_reason" => exit.as_str())
            .increment(0);
    }
    // Each method's successful calls: an error ratio has a denominator
    // from the start. Other codes appear with their first call.
    for rpc in inquest_proto::rpc::Rpc::ALL {
        metrics::counter!("inquest_rpc_requests_total", "method" => rpc.name(), "code" => "OK")
            .increment(0);
    }
}

fn describe_counters() {
    describe_counter!(
        "inquest_alert_notifications_total",
        "Alert notifications (POST /v1/alerts/alertmanager) by outcome: created an incident, updated one (alerts fired or resolved), unchanged (a repeat, nothing written), refused (400/401/403/413), unavailable (503), failed (500)."
    );
    describe_counter!(
        "inquest_alert_sessions_started_total",
        "Sessions started by an [[alerts.triggers]] match."
    );
    describe_counter!(
        "inquest_approvals_requested_total",
        "Tool calls the approval policy held for a human."
    );
    describe_counter!(
        "inquest_approvals_decided_total",
        "Held tool calls decided, by outcome: approved or denied (by a human, DecideToolCalls), expired (sessions whose pending calls approval.timeout denied)."
    );
    describe_counter!(
        "inquest_approvals_denied_by_rule_total",
        "Tool calls a deny rule of the approval policy refused at once."
    );
    describe_counter!(
        "inquest_alert_sessions_capped_total",
        "Trigger sessions not started because the tenant's alerts reached alerts.max_started_per_hour (the incident is recorded and says why)."
    );
    describe_counter!(
        "inquest_turns_lost_in_failover_total",
        "Committed, published turns a database failover lost (an asynchronous standby promoted without them), counted by the burst that wrote them; each lost seq holds a tombstone."
    );
    describe_counter!(
        "inquest_schedule_ticks_total",
        "[[schedules]] ticks, by outcome: fired (an incident and a session started; counted by the replica that fired it) or skipped (a tick missed while no replica ran with catch_up = \"none\", or the tenant over its limits)."
    );
    describe_counter!(
        "inquest_alert_follow_ups_total",
        "Alert changes sent to a group's session, by outcome: sent (a follow-up message stored), ended (the session takes no more messages; the change was dropped)."
    );
    describe_counter!(
        "inquest_alert_notices_total",
        "Notices stored on a group's session by alerts, by why (resolved: every alert of the group resolved)."
    );
    describe_counter!(
        "inquest_rpc_requests_total",
        "gRPC calls by method and final grpc-status code."
    );
    describe_counter!(
        "inquest_bursts_started_total",
        "Bursts this replica started, by mode (fresh: a message; confirmed: a held plan confirmed; recovered: an orphan claimed)."
    );
    describe_counter!(
        "inquest_lease_claims_total",
        "Leases this replica claimed for a burst, by mode."
    );
    describe_counter!(
        "inquest_bursts_ended_total",
        "Bursts this replica ended, by exit reason."
    );
    describe_counter!(
        "inquest_bursts_deferred_total",
        "Sessions left pending because every burst slot (limits.max_running_bursts) was taken."
    );
    describe_counter!(
        "inquest_lease_renewals_failed_total",
        "Lease renewals that did not succeed (the lease may still hold)."
    );
    describe_counter!(
        "inquest_leases_lost_total",
        "Leases this replica lost mid-burst: taken_over by another replica, or past their deadline unrenewed."
    );
    describe_counter!(
        "inquest_erased_sessions_total",
        "Sessions erased with everything they owned, by DeleteSession or DeleteIncident (api) or by the retention pass (retention)."
    );
    describe_counter!(
        "inquest_retention_removed_total",
        "Incidents (left without a session), audit events, and turns partitions (a month of sessions all erased, dropped whole) the retention passes and the hourly partition upkeep removed; sessions are counted in inquest_erased_sessions_total{via=\"retention\"}."
    );
    describe_counter!(
        "inquest_retention_passes_total",
        "[retention] passes this replica ran (none when nothing has a retention)."
    );
    describe_counter!(
        "inquest_interrupts_total",
        "Interrupting messages (SendMessage if_running = INTERRUPT) and how each reached the burst it stops. On the replica asked: local (the burst runs here and was stopped at once) or elsewhere (left to the notification and the holder's renewal). On the holder: feed (the notification), renewal (found at a lease renewal) or claim (waiting when the burst was claimed)."
    );
    describe_counter!(
        "inquest_orphans_recovered_total",
        "Orphaned sessions (their replica died or stalled) this replica claimed, by the reaper or on access."
    );
    describe_counter!(
        "inquest_orphan_recoveries_total",
        "Recovery plans made for orphans, by kind."
    );
    describe_counter!(
        "inquest_webhook_attempts_total",
        "Webhook delivery attempts: delivered (the receiver answered 2xx) or failed (retried)."
    );
    describe_counter!(
        "inquest_webhook_deliveries_total",
        "Events a webhook's stream finished with, by outcome: delivered (a 2xx) or gave_up (failing for webhooks.give_up_after; the stream went on)."
    );
    describe_counter!(
        "inquest_webhooks_disabled_total",
        "API webhooks this replica disabled because every attempt failed for webhooks.disable_after."
    );
    describe_counter!(
        "inquest_store_calls_total",
        "Database calls by operation and outcome."
    );
    describe_counter!(
        "inquest_health_probes_total",
        "Database probes made for health checking (at most one a second)."
    );
    describe_counter!(
        "inquest_feed_notifications_total",
        "Notifications from other replicas received on the cross-replica feed."
    );
    describe_counter!(
        "inquest_feed_resyncs_total",
        "Times every local watcher was made to reconnect from its cursor because the feed may have missed something, by cause."
    );
    describe_counter!(
        "inquest_watch_streams_opened_total",
        "WatchSession streams opened on this replica."
    );
    describe_counter!(
        "inquest_watch_lagged_total",
        "WatchSession streams ended ABORTED because their watcher fell behind."
    );
    describe_counter!(
        "inquest_watch_events_dropped_total",
        "Live events not delivered to a watcher that fell behind (it reconnects and reads them from the store)."
    );
    describe_counter!(
        "inquest_connections_refused_total",
        "Connections closed before they were served, by why (accept_error, max_connections: closed at accept; preface_timeout: no protocol preface in time)."
    );
    describe_counter!(
        "inquest_connections_closed_total",
        "Connections closed after they were served, by why (idle: no request open for limits.idle_connection_timeout)."
    );
    describe_counter!(
        "inquest_requests_refused_total",
        "Requests refused before the service, by why (host: a name a loopback server without authentication does not answer to)."
    );
    describe_counter!(
        "inquest_auth_failures_total",
        "Failed API token checks, by why (refused: no live token matched; throttled: refused at once, too many failures waiting; store_unavailable: the tokens could not be read)."
    );
    describe_counter!(
        "inquest_provider_requests_total",
        "Model provider requests by provider and outcome."
    );
    describe_counter!(
        "inquest_provider_tokens_total",
        "Tokens the model providers reported, by provider and kind (input, output)."
    );
    describe_counter!(
        "inquest_tool_calls_total",
        "Tool calls by tool server, tool and outcome (a tool name the model made up counts as unknown)."
    );
}

fn describe_gauges() {
    describe_gauge!(
        "inquest_bursts_running",
        "Bursts running on this replica now."
    );
    describe_gauge!(
        "inquest_bursts_max",
        "Bursts this replica runs at once at most (limits.max_running_bursts)."
    );
    describe_gauge!(
        "inquest_watch_streams",
        "WatchSession streams open on this replica now."
    );
    describe_gauge!(
        "inquest_store_pool_connections",
        "Database connections open, by pool lane (api, burst)."
    );
    describe_gauge!(
        "inquest_store_pool_idle",
        "Database connections idle, by pool lane."
    );
    describe_gauge!(
        "inquest_store_pool_waiting",
        "Callers waiting for a database connection, by pool lane."
    );
    describe_gauge!(
        "inquest_webhook_queue_depth",
        "Events not yet delivered on the webhook streams this replica holds, summed (each stream counted to 100000)."
    );
    describe_gauge!(
        "inquest_webhook_oldest_undelivered_seconds",
        Unit::Seconds,
        "Age of the oldest event not yet delivered on the webhook streams this replica holds (0 when none)."
    );
    describe_gauge!(
        "inquest_store_pool_max",
        "Database connections a pool lane opens at most."
    );
}

fn describe_histograms() {
    describe_histogram!(
        "inquest_approval_decision_seconds",
        Unit::Seconds,
        "From a tool call held for approval to a human's decision of it."
    );
    describe_histogram!(
        "inquest_rpc_duration_seconds",
        Unit::Seconds,
        "gRPC call latency by method (to the end of the response; a watch stream counts while it is open)."
    );
    describe_histogram!(
        "inquest_store_call_duration_seconds",
        Unit::Seconds,
        "Database call latency by operation."
    );
    describe_histogram!(
        "inquest_feed_delay_seconds",
        Unit::Seconds,
        "Delay from another replica's commit to its notification arriving here."
    );
    describe_histogram!(
        "inquest_provider_request_duration_seconds",
        Unit::Seconds,
        "Model provider request latency by provider."
    );
    describe_histogram!(
        "inquest_tool_call_duration_seconds",
        Unit::Seconds,
        "Tool call latency by tool server and tool."
    );
}

#[cfg(test)]
mod tests {
    use std::{
        collections::BTreeSet,
        path::Path,
        sync::{Arc, Mutex},
    };

    use metrics::{
        Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit,
    };

    /// Records the names [`super::describe`] describes.
    #[derive(Default)]
    struct Described(Arc<Mutex<BTreeSet<String>>>);

    impl Described {
        fn add(&self, key: KeyName, description: &SharedString) {
            assert!(
                !description.trim().is_empty(),
                "{} has a blank help",
                key.as_str()
            );
            if let Ok(mut names) = self.0.lock() {
                names.insert(key.as_str().to_owned());
            }
        }
    }

    impl Recorder for Described {
        fn describe_counter(&self, key: KeyName, _: Option<Unit>, description: SharedString) {
            self.add(key, &description);
        }
        fn describe_gauge(&self, key: KeyName, _: Option<Unit>, description: SharedString) {
            self.add(key, &description);
        }
        fn describe_histogram(&self, key: KeyName, _: Option<Unit>, description: SharedString) {
            self.add(key, &description);
        }
        fn register_counter(&self, _: &Key, _: &Metadata<'_>) -> Counter {
            Counter::noop()
        }
        fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
            Gauge::noop()
        }
        fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
            Histogram::noop()
        }
    }

    /// Every metric name in a `counter!`, `gauge!` or `histogram!` call of
    /// the crates' sources (tests left out).
    fn recorded_names() -> BTreeSet<String> {
        let mut names = BTreeSet::new();
        let mut stack = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("..")];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for path in entries.flatten().map(|e| e.path()) {
                if path.is_dir() {
                    if !path.ends_with("tests") && !path.ends_with("target") {
                        stack.push(path);
                    }
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let text = std::fs::read_to_string(&path).unwrap_or_default();
                    for kind in ["counter!(", "gauge!(", "histogram!("] {
                        for (at, _) in text.match_indices(kind) {
                            let rest = text[at + kind.len()..].trim_start();
                            if let Some(rest) = rest.strip_prefix('"')
                                && let Some(end) = rest.find('"')
                                && is_metric_name(&rest[..end])
                            {
                                names.insert(rest[..end].to_owned());
                            }
                        }
                    }
                }
            }
        }
        names
    }

    /// A name, not this file's own search strings.
    fn is_metric_name(name: &str) -> bool {
        name.starts_with("inquest_")
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    }

    #[test]
    fn every_recorded_metric_is_described() {
        let recorder = Described::default();
        let described = Arc::clone(&recorder.0);
        metrics::with_local_recorder(&recorder, super::describe);
        let described = described.lock().map(|d| d.clone()).unwrap_or_default();
        let recorded = recorded_names();
        assert!(recorded.len() > 20, "too few names found: {recorded:?}");
        let missing: Vec<_> = recorded.difference(&described).collect();
        assert!(
            missing.is_empty(),
            "recorded but not described: {missing:?}"
        );
        let stale: Vec<_> = described.difference(&recorded).collect();
        assert!(stale.is_empty(), "described but never recorded: {stale:?}");
    }
}
