// Chooses the total-order protocol of a group from its YAML (groups[].ordering).
#include "consensus/consensus_order.h"
#include "consensus/sequencer_order.h"
#include "nso/group.h"

namespace cohort::nso {

std::unique_ptr<consensus::TotalOrder> MakeTotalOrder(const GroupConfig& group_config,
                                                      const Config& config,
                                                      const std::vector<NodeId>& members) {
  if (group_config.ordering == GroupConfig::Ordering::kSequencer) {
    consensus::SequencerOrderOptions options;
    options.batch_messages_max = config.consensus.batch_max_messages;
    options.batch_bytes_max = config.consensus.batch_max_bytes;
    options.optimisation_3 = config.consensus.optimisation_3;
    return std::make_unique<consensus::SequencerOrder>(config.node_id, members, options);
  }
  consensus::ConsensusOrderOptions options;
  options.consensus.optimisation_1 = config.consensus.optimisation_1;
  options.consensus.optimisation_2 = config.consensus.optimisation_2;
  options.consensus.optimisation_3 = config.consensus.optimisation_3;
  options.consensus.round_delay_ms = config.consensus.round_delay_ms;
  options.batch_messages_max = config.consensus.batch_max_messages;
  options.batch_bytes_max = config.consensus.batch_max_bytes;
  return std::make_unique<consensus::ConsensusOrder>(config.node_id, members, options);
}

}  // namespace cohort::nso
