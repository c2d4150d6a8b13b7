// One group as hosted by one daemon: its view, its total-order protocol, its failure detector and
// the time-silence mechanism (003 section 3). Owned by Node, on the protocol thread.
#ifndef COHORT_NSO_GROUP_H_
#define COHORT_NSO_GROUP_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "consensus/total_order.h"
#include "membership/failure_detector.h"
#include "nso/config.h"
#include "nso/transport.h"

namespace cohort::nso {

struct GroupCounters {
  uint64_t heartbeats_sent = 0;
  uint64_t envelopes_sent = 0;
  uint64_t suspicions = 0;
  uint64_t exclusions = 0;
};

class Group {
 public:
  Group(const GroupConfig& group_config, const Config& config, std::vector<NodeId> members,
        Transport* transport, uint64_t now_ms);

  const std::string& name() const { return config_.name; }
  const GroupConfig& config() const { return config_; }
  const std::vector<NodeId>& members() const { return members_; }
  uint64_t view_id() const { return view_id_; }
  bool is_member() const { return order_ != nullptr; }
  bool IsMember(NodeId node) const;
  bool suspected(NodeId node) const;
  // Members that the failure detector does not suspect (self included when a member).
  uint32_t trusted_count() const;
  // The member that orders requests for non-members: the lowest-id member not suspected.
  NodeId RequestManager() const;

  // A-broadcast from this member; deliveries (possibly of other messages too) are appended.
  void Broadcast(std::string payload, std::vector<consensus::Delivery>* deliveries);
  // An envelope for this group from `from` (ordering traffic or heartbeat).
  void Receive(NodeId from, const wire::Envelope& envelope,
               std::vector<consensus::Delivery>* deliveries);
  // `app_pending`: the application has calls in flight in this group (event-driven groups only
  // watch their members while something is pending, 003 section 3).
  void Tick(uint64_t now_ms, bool app_pending, std::vector<consensus::Delivery>* deliveries);

  // Sends an envelope to a member, filling in the header (version, group, sender, view).
  void SendTo(NodeId to, wire::Envelope envelope);

  // Members the detector's exclusion timeout fired for since the last call.
  std::vector<NodeId> TakeExclusions() { return std::move(exclusions_); }

  const GroupCounters& counters() const { return counters_; }
  const consensus::OrderCounters* order_counters() const;
  bool HasPending() const;

 private:
  void Flush(consensus::Outbox* outbox, std::vector<consensus::Delivery>* deliveries);
  void SendHeartbeats();
  void Detect(uint64_t now_ms, std::vector<consensus::Delivery>* deliveries);

  const GroupConfig config_;
  const NodeId self_;
  Transport* const transport_;
  std::vector<NodeId> members_;
  std::vector<NodeId> peers_;   // members but self
  uint64_t view_id_ = 1;
  uint64_t now_ms_;
  std::unique_ptr<consensus::TotalOrder> order_;          // null when self is not a member
  std::unique_ptr<membership::FailureDetector> detector_;  // null when self is not a member
  std::map<NodeId, uint64_t> last_sent_ms_;  // time-silence: last message to each peer
  std::vector<NodeId> exclusions_;
  GroupCounters counters_;
};

// The total-order protocol the YAML asks for (consensus or sequencer).
std::unique_ptr<consensus::TotalOrder> MakeTotalOrder(const GroupConfig& group_config,
                                                      const Config& config,
                                                      const std::vector<NodeId>& members);

}  // namespace cohort::nso

#endif  // COHORT_NSO_GROUP_H_
