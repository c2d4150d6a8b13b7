// etcd's own benchmark tool (tools/benchmark of the etcd repository), for cohort-bench.
package main

import (
	"fmt"
	"os"

	"go.etcd.io/etcd/v3/tools/benchmark/cmd"
)

func main() {
	if err := cmd.RootCmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
