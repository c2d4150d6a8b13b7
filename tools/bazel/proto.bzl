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
