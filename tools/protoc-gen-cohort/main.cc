// protoc-gen-cohort: protoc --plugin=protoc-gen-cohort=<this> --cohort_out=<dir> x.proto
#include <google/protobuf/compiler/plugin.h>

#include "tools/protoc-gen-cohort/generator.h"

int main(int argc, char* argv[]) {
  cohort::protoc_gen::CohortGenerator generator;
  return google::protobuf::compiler::PluginMain(argc, argv, &generator);
}
