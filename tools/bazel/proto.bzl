"""cc_proto: C++ (and optionally gRPC) code from a .proto with the system protoc (no downloads)."""

def cc_proto(name, src, grpc = False, deps = [], visibility = None):
    base = src[:-len(".proto")]
    outs = [base + ".pb.h", base + ".pb.cc"]
    cmd = "protoc -I. --cpp_out=$(GENDIR) "
    if grpc:
        outs += [base + ".grpc.pb.h", base + ".grpc.pb.cc"]
        cmd += "--grpc_out=$(GENDIR) --plugin=protoc-gen-grpc=$$(which grpc_cpp_plugin) "
    native.genrule(
        name = name + "_gen",
        srcs = [src] + [d + "_src" for d in deps],
        outs = outs,
        cmd = cmd + "$(location " + src + ")",
    )
    native.filegroup(name = name + "_src", srcs = [src], visibility = visibility)
    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        deps = deps + (["@grpc//:lib"] if grpc else ["@protobuf//:lib"]),
        visibility = visibility,
    )

def cohort_typed_proto(name, src, deps = [], visibility = None):
    """Messages (.pb.h/.pb.cc) and typed Cohort stubs (.cohort.h, issue 5) from one .proto.

    The stubs come from //tools/protoc-gen-cohort: <Service>Group (client) and <Service>Servant
    (server) per service. `deps` are cc_proto or cohort_typed_proto targets of imported protos.
    """
    base = src[:-len(".proto")]
    outs = [base + ".pb.h", base + ".pb.cc", base + ".cohort.h"]
    plugin = "//tools/protoc-gen-cohort"
    native.genrule(
        name = name + "_gen",
        srcs = [src] + [d + "_src" for d in deps],
        outs = outs,
        tools = [plugin],
        cmd = ("protoc -I. --cpp_out=$(GENDIR) --plugin=protoc-gen-cohort=$(location " + plugin +
               ") --cohort_out=$(GENDIR) $(location " + src + ")"),
    )
    native.filegroup(name = name + "_src", srcs = [src], visibility = visibility)
    native.cc_library(
        name = name,
        srcs = [base + ".pb.cc"],
        hdrs = [base + ".pb.h", base + ".cohort.h"],
        deps = deps + [
            "//invocation:client",
            "//invocation:typed",
            "@absl//:lib",
            "@protobuf//:lib",
        ],
        visibility = visibility,
    )
