// The etcd server, built from the Go module proxy for cohort-bench's peer comparison (issue 7).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
