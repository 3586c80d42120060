// The store port as an actor: what troupe persists. Adapters live in io/ (SQLite). Every write is
// durable before it is answered; the writes of a run's attempt are fenced by its lease epoch (AS-82):
// a write at an epoch that is no longer current answers errc::conflict and changes nothing.
#pragma once

#include "actors/atoms.hpp"
#include "actors/messages.hpp"
#include "protocol/identity.hpp"
#include "protocol/metrics.hpp"
#include "actors/tenant_scope.hpp"

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

namespace troupe {

using store_actor = caf::typed_actor<
  // Upserts the session, adding one run to its count.
  caf::reacts_to<save_session_atom, session_record>,
  // The stored record of (tenant_key, user_key, session_id); not_found when there is none.
  caf::replies_to<get_session_atom, std::string, std::string, std::string>::with<session_record>,
  // Stores a new `queued` run; conflict ("Run already exists") when its id is taken (AS-49).
  caf::replies_to<create_run_atom, run_record>::with<run_record>,
  // Starts a chat run's attempt under (worker_id, lease_seconds): a new run, or a terminal chat run
  // reopened (AS-10); conflict otherwise. The answer carries the epoch and the first sequence.
  caf::replies_to<begin_chat_atom, run_record, std::string, double>::with<run_record>,
  // Claims ready queued runs and starts their attempts (AS-54): tenants in turn after the request's
  // `after_tenant`, wrapping, at most n of them, each with room under `tenant_max_running`; from the
  // k taken, their runs in priority order, then ready time (CJ-18), dealt a run each in turn, so a
  // tenant gets at most ceil(n/k) unless another has fewer (CJ-19). Answered in the order dealt: the
  // last run's tenant is the one served last.
  caf::replies_to<claim_atom, claim_request>::with<run_claim>,
  // Appends one event of the attempt at (run_id, lease_epoch).
  caf::replies_to<append_atom, std::string, int64_t, stored_event>::with<bool>,
  // Ends an attempt (terminal, with its trace, or queued for a retry).
  caf::replies_to<transition_atom, run_transition>::with<run_record>,
  // Extends the lease of (run_id, lease_epoch) by lease_seconds from now.
  caf::replies_to<renew_atom, std::string, int64_t, double>::with<bool>,
  // AS-83: re-queues (or fails) every running run whose lease expired, or every running run when
  // `all_running` (the previous owner of an embedded store is gone); each such attempt ends as the
  // caller's `ends` say (protocol::lapsed_lease_ends), with its `error` event. The report names the
  // runs it ended (failed, or completed when their attempt had stored its session_end), whose pending
  // approvals are then denied.
  caf::replies_to<recover_atom, bool, protocol::lapse_ends>::with<recovery_report>,
  // CJ-16: re-queues every run the worker holds as running (its attempts were stopped), each attempt
  // closed by the caller's `end`; the run counts a handoff, not an attempt, while it has had fewer
  // handoffs than the last argument (cluster.max_handoffs). Answers how many.
  caf::replies_to<handback_atom, std::string, protocol::attempt_end, int64_t>::with<int64_t>,
  // CJ-15: the same for one run the caller's attempt holds at that lease epoch (stopped first);
  // false, changing nothing, when the run is no longer so held.
  caf::replies_to<handback_atom, std::string, int64_t, protocol::attempt_end, int64_t>::with<bool>,
  // Cancels a run no live attempt holds (AS-52): a queued run never starts; a running one is fenced
  // and ends with the caller's `end` (protocol::cancelled_end) as its error event; a terminal one is
  // returned unchanged.
  caf::replies_to<cancel_atom, std::string, protocol::attempt_end>::with<run_record>,
  caf::replies_to<get_run_atom, std::string>::with<run_record>,
  // Newest first, filtered by status ("" = all), at most `limit` (0 = all), of the scope's tenants
  // (AS-84: the count too).
  caf::replies_to<list_runs_atom, std::string, int64_t, protocol::tenant_scope>::with<run_list>,
  // Events after a sequence (exclusive), at most `limit` (0 = all).
  caf::replies_to<events_atom, std::string, int64_t, int64_t>::with<run_events_page>,
  // Traces newest first, filtered by session_id ("" = all), at most `limit` (0 = all), of the scope's
  // tenants.
  caf::replies_to<list_traces_atom, std::string, int64_t, protocol::tenant_scope>::with<trace_list>,
  caf::replies_to<get_trace_atom, std::string>::with<std::string>,
  // Stores an approval (new or transitioned) and answers it once durable (AS-81).
  caf::replies_to<save_approval_atom, protocol::approval_record>::with<protocol::approval_record>,
  // Moves a pending approval to the record's final state (status, approved, resolved_at, reason) and
  // answers it once durable; errc::not_found when it is not pending: one resolution wins (CJ-26).
  caf::replies_to<settle_approval_atom, protocol::approval_record>::with<protocol::approval_record>,
  caf::replies_to<get_approval_atom, std::string>::with<protocol::approval_record>,
  caf::replies_to<list_approvals_atom, protocol::approval_query>::with<approval_list>,
  // Counts one request of user_key against its fixed window of `limit` per hour at `now` (epoch
  // seconds); the window is stored before the answer, so a restart does not reset it (AS-8, AS-92).
  caf::replies_to<rate_atom, std::string, int64_t, int64_t>::with<protocol::rate_limit_decision>,
  // One audit record (AS-45).
  caf::reacts_to<audit_atom, protocol::audit_record>,
  // The durable counts of the metrics endpoints (AS-59); `detailed` adds what reads whole tables. For
  // one tenant (AS-84), only the counts of its records, without the store's streams.
  caf::replies_to<stats_atom, bool, protocol::tenant_scope>::with<protocol::store_stats>,
  // The store answers: its engine and schema version (GET /ready); an error when it cannot reach its
  // database.
  caf::replies_to<ping_atom>::with<protocol::store_health>>;

} // namespace troupe

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::protocol::attempt_end)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::protocol::lapse_ends)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::protocol::store_stats)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::protocol::store_health)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::protocol::rate_limit_decision)
