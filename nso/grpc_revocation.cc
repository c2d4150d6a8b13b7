#include "nso/grpc_revocation.h"

#include <string>

namespace cohort::nso {
namespace {

class RevocationVerifier : public grpc::experimental::ExternalCertificateVerifier {
 public:
  RevocationVerifier(std::shared_ptr<const RevocationSource> source, bool check_host)
      : source_(std::move(source)), check_host_(check_host) {}

  // Synchronous: one OpenSSL chain check, on gRPC's handshake thread.
  bool Verify(grpc::experimental::TlsCustomVerificationCheckRequest* request,
              std::function<void(grpc::Status)> /*callback*/,
              grpc::Status* sync_status) override {
    // The leaf, then the rest: gRPC's "full chain" leaves the leaf out on a server (OpenSSL's
    // SSL_get_peer_cert_chain), so it only adds intermediates (untrusted) here.
    grpc::string_ref leaf = request->peer_cert();
    if (leaf.empty()) {
      *sync_status = grpc::Status::OK;
      return true;
    }
    grpc::string_ref rest = request->peer_cert_full_chain();
    std::string chain(leaf.data(), leaf.size());
    chain.append("\n").append(rest.data(), rest.size());
    grpc::string_ref target = request->target_name();
    absl::Status checked = source_->Get()->Check(
        chain,
        check_host_ ? absl::string_view(target.data(), target.size()) : absl::string_view());
    *sync_status = checked.ok() ? grpc::Status::OK
                                : grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                                               std::string(checked.message()));
    return true;
  }

  void Cancel(grpc::experimental::TlsCustomVerificationCheckRequest* /*request*/) override {}

 private:
  const std::shared_ptr<const RevocationSource> source_;
  const bool check_host_;
};

}  // namespace

std::shared_ptr<grpc::experimental::CertificateVerifier> MakeRevocationVerifier(
    std::shared_ptr<const RevocationSource> source, bool check_host) {
  return grpc::experimental::ExternalCertificateVerifier::Create<RevocationVerifier>(
      std::move(source), check_host);
}

}  // namespace cohort::nso
