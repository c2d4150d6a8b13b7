"""Repository rule: wraps a system library found by pkg-config as a cc_library (no downloads)."""

def _pkg_config_impl(ctx):
    args = ["pkg-config", "--libs"] + ctx.attr.modules
    result = ctx.execute(args)
    if result.return_code != 0:
        fail("pkg-config failed for %s: %s (install the Debian -dev packages; see tools/install-deps)" % (ctx.attr.modules, result.stderr))
    linkopts = result.stdout.strip().split(" ")
    cflags = ctx.execute(["pkg-config", "--cflags"] + ctx.attr.modules).stdout.strip()
    defines = [f[2:] for f in cflags.split(" ") if f.startswith("-D")]
    ctx.file("WORKSPACE", "")
    ctx.file("BUILD", """
cc_library(
    name = "lib",
    linkopts = {linkopts},
    defines = {defines},
    visibility = ["//visibility:public"],
)
""".format(linkopts = repr([o for o in linkopts if o] + ctx.attr.extra_linkopts), defines = repr(defines)))

pkg_config = repository_rule(
    implementation = _pkg_config_impl,
    attrs = {
        "modules": attr.string_list(mandatory = True),
        "extra_linkopts": attr.string_list(default = []),
    },
    local = True,
)
