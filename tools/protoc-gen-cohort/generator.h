// protoc-gen-cohort: for every `service` of a .proto, typed Cohort stubs in <file>.cohort.h
// (issue 5; 003 section 4 puts this logic "at the application level (in client and server
// stubs)"):
//   class <Service>Group    client side: one method per rpc returning TypedReplies<Resp>, plus
//                           <Rpc>OneWay; the method name on the wire is the rpc name.
//   class <Service>Servant  server side: one pure virtual per rpc and RegisterWith(Servant*).
// Streaming rpcs have no meaning for a group invocation and are refused.
#ifndef COHORT_TOOLS_PROTOC_GEN_COHORT_GENERATOR_H_
#define COHORT_TOOLS_PROTOC_GEN_COHORT_GENERATOR_H_

#include <cstdint>
#include <string>

#include <google/protobuf/compiler/code_generator.h>
#include <google/protobuf/descriptor.h>

namespace cohort::protoc_gen {

class CohortGenerator : public google::protobuf::compiler::CodeGenerator {
 public:
  bool Generate(const google::protobuf::FileDescriptor* file, const std::string& parameter,
                google::protobuf::compiler::GeneratorContext* context,
                std::string* error) const override;
  uint64_t GetSupportedFeatures() const override { return FEATURE_PROTO3_OPTIONAL; }
};

// Exposed for tests and reuse.
std::string HeaderName(const google::protobuf::FileDescriptor* file);  // "a/b.cohort.h"
std::string CppType(const google::protobuf::Descriptor* message);       // "::pkg::Outer_Inner"
// Empty if the service can be generated; otherwise why not (streaming rpc, name clash).
std::string CheckService(const google::protobuf::ServiceDescriptor* service);

}  // namespace cohort::protoc_gen

#endif  // COHORT_TOOLS_PROTOC_GEN_COHORT_GENERATOR_H_
