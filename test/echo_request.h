// The invocation the client-stub tests send to their fake daemons: method "echo" of group "g".
#ifndef COHORT_TEST_ECHO_REQUEST_H_
#define COHORT_TEST_ECHO_REQUEST_H_

#include <string>

#include "proto/api.pb.h"

namespace cohort::test {

inline api::InvokeRequest EchoRequest(const std::string& payload) {
  api::InvokeRequest request;
  request.set_group("g");
  request.set_method("echo");
  request.set_payload(payload);
  return request;
}

}  // namespace cohort::test

#endif  // COHORT_TEST_ECHO_REQUEST_H_
