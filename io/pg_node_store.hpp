// The node store port (actors/node_store.hpp) on PostgreSQL: the `nodes` table of migration 0006,
// every time from the database's clock. A node's runs are those whose worker_id is its own
// (worker_of: node-<hex> holds as worker-<hex>). Its worker has a connection of its own (CJ-4), so
// heartbeats never queue behind the stores' work. Included by io/pg_store.cpp only.
#pragma once

#include "actors/node_store.hpp"
#include "io/pg_connection.hpp"

#include <caf/all.hpp>

#include <variant>

namespace troupe::io::node_store {

template <class T>
using outcome = std::variant<T, caf::error>;

namespace statements {

// AS-78's spelling of a timestamptz column, in UTC.
// The worker id a node's runs carry (actors/cluster_membership.hpp's worker_of), and a lease that
// expired long ago, which the next recovery sweep takes.
#define TROUPE_WORKER_OF(node_id) "'worker-' || substr(" node_id ", 6)"
#define TROUPE_EXPIRED "'1970-01-01T00:00:00.000000+00:00'"
#define TROUPE_PG_TIMESTAMP(column) "to_char(" column " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"+00:00\"')"

inline constexpr char join_node[] =
  "INSERT INTO nodes (node_id, name, endpoint, version, state) VALUES (?1, ?2, ?3, ?4, 'alive')";
inline constexpr char beat[] = R"sql(
  UPDATE nodes SET heartbeat_at = now() WHERE node_id = ?1 AND state IN ('alive', 'draining') RETURNING state)sql";
// Nothing here waits on a lock: a row held by a transaction of a node that froze mid-way is skipped
// and taken at a later heartbeat, so the declaring node's own heartbeats never queue behind it.
inline constexpr char declare_dead[] = R"sql(
  WITH silent AS (
    SELECT node_id FROM nodes
    WHERE state IN ('alive', 'draining') AND heartbeat_at < now() - make_interval(secs => ?1)
    FOR UPDATE SKIP LOCKED)
  UPDATE nodes SET state = 'dead' FROM silent WHERE nodes.node_id = silent.node_id RETURNING nodes.node_id)sql";
// A node this process succeeds on the same data dir: dead for certain, whatever its heartbeat says.
inline constexpr char declare_one_dead[] = R"sql(
  UPDATE nodes SET state = 'dead' WHERE node_id = ?1 AND state IN ('alive', 'draining') RETURNING node_id)sql";
// The dead nodes' runs get an expired lease.
inline constexpr char expire_dead_leases[] =
  "UPDATE runs SET lease_expires_at = " TROUPE_EXPIRED " WHERE run_id IN ("
  " SELECT r.run_id FROM runs r JOIN nodes n ON r.worker_id = " TROUPE_WORKER_OF("n.node_id")
  " WHERE n.state = 'dead' AND r.status = 'running' AND r.lease_expires_at <> " TROUPE_EXPIRED
  " FOR UPDATE OF r SKIP LOCKED)";
// A run whose row is locked (a write of the node stuck before a partition) keeps its lease, which
// then lapses on its own.
inline constexpr char expire_leases[] =
  "UPDATE runs SET lease_expires_at = " TROUPE_EXPIRED " WHERE run_id IN ("
  " SELECT run_id FROM runs WHERE status = 'running' AND worker_id = " TROUPE_WORKER_OF("?1")
  " FOR UPDATE SKIP LOCKED)";
// Rows of nodes gone a day are of no more use to anyone.
inline constexpr char forget_gone[] =
  "DELETE FROM nodes WHERE state IN ('dead', 'left') AND heartbeat_at < now() - interval '1 day'";
inline constexpr char list_nodes[] = "SELECT n.node_id, n.name, n.endpoint, n.version, n.state, "
                                     TROUPE_PG_TIMESTAMP("n.started_at") ", " TROUPE_PG_TIMESTAMP("n.heartbeat_at") ", "
                                     "EXTRACT(EPOCH FROM now() - n.heartbeat_at)::float8, "
                                     "(SELECT count(*) FROM runs r WHERE r.status = 'running' AND r.worker_id = "
                                     TROUPE_WORKER_OF("n.node_id") ") "
                                     "FROM nodes n ORDER BY n.started_at, n.node_id LIMIT 1000";
inline constexpr char cluster_id[] = "SELECT cluster_id FROM cluster LIMIT 1";
inline constexpr char set_state[] =
  "UPDATE nodes SET state = ?2 WHERE node_id = ?1 AND state IN ('alive', 'draining')";

#undef TROUPE_PG_TIMESTAMP
#undef TROUPE_EXPIRED
#undef TROUPE_WORKER_OF

} // namespace statements

class nodes_db : public pg::connection {
public:
  outcome<bool> join(const node_row& n) {
    sql(statements::join_node).bind(1, n.node_id).bind(2, n.name).bind(3, n.endpoint).bind(4, n.version).done();
    return true;
  }

  outcome<std::string> heartbeat(const std::string& node_id) {
    auto q = sql(statements::beat);
    q.bind(1, node_id);
    return q.row() ? q.text(0) : std::string{};
  }

  outcome<std::vector<std::string>> declare_dead(double expiry_seconds) {
    auto q = sql(statements::declare_dead);
    q.bind(1, std::optional<double>(expiry_seconds));
    return declared(q);
  }

  outcome<std::vector<std::string>> declare_dead(const std::string& node_id) {
    auto q = sql(statements::declare_one_dead);
    q.bind(1, node_id);
    return declared(q);
  }

  outcome<node_list> list() {
    node_list out;
    auto q = sql(statements::list_nodes);
    while (q.row())
      out.push_back({q.text(0), q.text(1), q.text(2), q.text(3), q.text(4), q.text(5), q.text(6),
                     q.real(7).value_or(0), q.integer(8)});
    return out;
  }

  outcome<std::string> cluster_id() {
    auto q = sql(statements::cluster_id);
    return q.row() ? q.text(0) : std::string{};
  }

  outcome<int64_t> expire_leases_of(const std::string& node_id) {
    sql(statements::expire_leases).bind(1, node_id).done();
    return changes();
  }

private:
  // The ids `q` marked dead; every dead node's runs get their leases expired (those missed before too).
  template <class Query>
  std::vector<std::string> declared(Query& q) {
    std::vector<std::string> dead;
    while (q.row())
      dead.push_back(q.text(0));
    sql(statements::expire_dead_leases).done();
    sql(statements::forget_gone).done();
    return dead;
  }

public:
  outcome<bool> move_to(const std::string& node_id, const std::string& state) {
    sql(statements::set_state).bind(1, node_id).bind(2, state).done();
    return changes() == 1;
  }
};

template <class Engine>
caf::message_handler port_behavior(Engine engine) {
  return {
    [=](join_atom, node_row& n) {
      return engine.template write<bool>([n = std::move(n)](nodes_db& db) { return db.join(n); });
    },
    [=](heartbeat_atom, std::string& id) {
      return engine.template write<std::string>([id = std::move(id)](nodes_db& db) { return db.heartbeat(id); });
    },
    [=](declare_dead_atom, double expiry) {
      return engine.template write<std::vector<std::string>>([=](nodes_db& db) { return db.declare_dead(expiry); });
    },
    [=](declare_dead_atom, std::string& node_id) {
      return engine.template write<std::vector<std::string>>([=](nodes_db& db) { return db.declare_dead(node_id); });
    },
    [=](list_nodes_atom) { return engine.template read<node_list>([](nodes_db& db) { return db.list(); }); },
    [=](cluster_id_atom) { return engine.template read<std::string>([](nodes_db& db) { return db.cluster_id(); }); },
    [=](node_state_atom, std::string& id, std::string& state) {
      return engine.template write<bool>([=](nodes_db& db) { return db.move_to(id, state); });
    },
    [=](fence_atom, std::string& id) {
      return engine.template write<int64_t>([=](nodes_db& db) { return db.expire_leases_of(id); });
    },
  };
}

} // namespace troupe::io::node_store
