// lincheck: checks a history recorded by kv-nemesis (tools/kv_nemesis_history.cc) against a
// sequential key-value specification with Porcupine (github.com/anishathalye/porcupine),
// partitioned by key.
//
//	lincheck [-timeout 60s] [-html out.html] HISTORY.jsonl
//
// Prints "linearizable" (exit 0), "NOT linearizable" (exit 1), "unknown: checker timed out"
// (exit 2); 3 for a bad command line or an unreadable history.
//
// History: one JSON object per line, one per completed client operation:
//
//	{"client":2,"op":"put","key":"k1","value":"c2.17","outcome":"ok","call_ns":..,"return_ns":..}
//	{"client":0,"op":"get","key":"k1","outcome":"ok","found":true,"result":"c2.17",...}
//	{"client":1,"op":"cas","key":"k1","expected":"c2.17","value":"c1.4","outcome":"fail","result":"c0.3",...}
//
// op: put | get | cas. outcome: "ok" (put done; get answered, found says whether the key was
// set and result is the value; cas swapped), "fail" (cas answered FAILED_PRECONDITION; result is
// the value the replica found, "-" for not set), or "unknown" (the call failed or timed out on
// the client: it may or may not have taken effect). "expected": "-" means "not set". "ok" (a
// boolean) is accepted as a shorthand when outcome is absent.
//
// Unknown outcomes: a get that failed is dropped (it observed nothing); a put or cas that failed
// may have taken effect at any time after its call, so its return time is +infinity and the model
// accepts it whether or not it took effect (a put that is linearized after every other operation
// is indistinguishable from one that never happened). Unknown writes whose value nobody observed
// are dropped before the search (dropUnobserved says why that is sound).
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

type record struct {
	Client   int    `json:"client"`
	Op       string `json:"op"`
	Key      string `json:"key"`
	Value    string `json:"value"`
	Expected string `json:"expected"`
	Outcome  string `json:"outcome"`
	Ok       *bool  `json:"ok"`
	Found    bool   `json:"found"`
	Result   string `json:"result"`
	CallNs   int64  `json:"call_ns"`
	ReturnNs int64  `json:"return_ns"`
}

type input struct {
	op       string
	key      string
	value    string // put / cas: the new value
	expected string // cas: "" = not set
}

type output struct {
	outcome string // ok | fail | unknown
	found   bool
	result  string // get: the value; cas fail: the value found ("" = not set)
}

// notSet maps the wire's "-" to the model's "" (values written by the driver are never empty).
func notSet(v string) string {
	if v == "-" {
		return ""
	}
	return v
}

func partitionByKey(history []porcupine.Operation) [][]porcupine.Operation {
	byKey := map[string][]porcupine.Operation{}
	var keys []string
	for _, op := range history {
		k := op.Input.(input).key
		if _, seen := byKey[k]; !seen {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], op)
	}
	sort.Strings(keys)
	var out [][]porcupine.Operation
	for _, k := range keys {
		out = append(out, byKey[k])
	}
	return out
}

// The per-key state is the key's value, "" when not set. The model is nondeterministic only for a
// cas of unknown outcome linearized where it matches: it may have taken effect or not (the call
// may never have been executed).
var kvModel = porcupine.NondeterministicModel{
	Partition: partitionByKey,
	Init:      func() []interface{} { return []interface{}{""} },
	Step: func(state, in, out interface{}) []interface{} {
		s := state.(string)
		i := in.(input)
		o := out.(output)
		ok := func(next string) []interface{} { return []interface{}{next} }
		switch i.op {
		case "put":
			return ok(i.value)
		case "get":
			if o.found && o.result == s || !o.found && s == "" {
				return ok(s)
			}
		case "cas":
			match := s == i.expected
			switch o.outcome {
			case "ok":
				if match {
					return ok(i.value)
				}
			case "fail":
				if !match && o.result == s {
					return ok(s)
				}
			default:
				if match {
					return []interface{}{i.value, s}
				}
				return ok(s)
			}
		}
		return nil
	},
	DescribeOperation: func(in, out interface{}) string {
		i := in.(input)
		o := out.(output)
		switch i.op {
		case "put":
			return fmt.Sprintf("put(%s, %s) %s", i.key, i.value, o.outcome)
		case "get":
			if o.found {
				return fmt.Sprintf("get(%s) -> %s", i.key, o.result)
			}
			return fmt.Sprintf("get(%s) -> not set", i.key)
		default:
			return fmt.Sprintf("cas(%s, %q -> %s) %s (found %q)", i.key, i.expected, i.value,
				o.outcome, o.result)
		}
	},
	DescribeState: func(state interface{}) string { return fmt.Sprintf("%q", state.(string)) },
}

// dropUnobserved removes the put and cas operations of unknown outcome whose value (unique per
// write) no operation of the history observes: no get returned it, no cas expected it, no failed
// cas found it. That is sound: in a linearization with such a write W, every operation between W
// and the next write that takes effect would observe W's value, so there is none but writes and
// unknown cas that do not take effect, and removing W leaves a linearization; conversely W can
// always be linearized last (its return time is +infinity). Without this, every unknown write
// stays pending to the end of the history and Porcupine's search grows exponentially.
func dropUnobserved(ops []porcupine.Operation) ([]porcupine.Operation, int) {
	observed := map[[2]string]bool{}
	for _, op := range ops {
		i := op.Input.(input)
		o := op.Output.(output)
		switch {
		case i.op == "get" && o.found:
			observed[[2]string{i.key, o.result}] = true
		case i.op == "cas" && o.outcome == "fail":
			observed[[2]string{i.key, o.result}] = true
			observed[[2]string{i.key, i.expected}] = true
		case i.op == "cas":
			observed[[2]string{i.key, i.expected}] = true
		}
	}
	var kept []porcupine.Operation
	dropped := 0
	for _, op := range ops {
		i := op.Input.(input)
		o := op.Output.(output)
		if o.outcome == "unknown" && i.op != "get" && !observed[[2]string{i.key, i.value}] {
			dropped++
			continue
		}
		kept = append(kept, op)
	}
	return kept, dropped
}

func main() {
	timeout := flag.Duration("timeout", 60*time.Second, "give up (exit 2) after this long")
	html := flag.String("html", "", "write Porcupine's visualization of the history to this file")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: lincheck [-timeout 60s] [-html out.html] HISTORY.jsonl")
		os.Exit(3)
	}
	f, err := os.Open(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "lincheck:", err)
		os.Exit(3)
	}
	defer f.Close()

	var ops []porcupine.Operation
	counts := map[string]int{}
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 1<<24)
	line := 0
	for scanner.Scan() {
		line++
		if len(scanner.Bytes()) == 0 {
			continue
		}
		var r record
		if err := json.Unmarshal(scanner.Bytes(), &r); err != nil {
			fmt.Fprintf(os.Stderr, "lincheck: %s:%d: %v\n", flag.Arg(0), line, err)
			os.Exit(3)
		}
		outcome := r.Outcome
		if outcome == "" && r.Ok != nil {
			if *r.Ok {
				outcome = "ok"
			} else {
				outcome = "unknown"
			}
		}
		if r.Op != "put" && r.Op != "get" && r.Op != "cas" ||
			outcome != "ok" && outcome != "fail" && outcome != "unknown" ||
			outcome == "fail" && r.Op != "cas" || r.Key == "" {
			fmt.Fprintf(os.Stderr, "lincheck: %s:%d: bad record\n", flag.Arg(0), line)
			os.Exit(3)
		}
		counts[r.Op+" "+outcome]++
		ret := r.ReturnNs
		if outcome == "unknown" {
			if r.Op == "get" {
				continue // observed nothing
			}
			ret = math.MaxInt64
		}
		ops = append(ops, porcupine.Operation{
			ClientId: r.Client,
			Input:    input{op: r.Op, key: r.Key, value: r.Value, expected: notSet(r.Expected)},
			Call:     r.CallNs,
			Output:   output{outcome: outcome, found: r.Found, result: notSet(r.Result)},
			Return:   ret,
		})
	}
	if err := scanner.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "lincheck:", err)
		os.Exit(3)
	}
	var summary []string
	for k := range counts {
		summary = append(summary, fmt.Sprintf("%s=%d", k, counts[k]))
	}
	sort.Strings(summary)
	ops, dropped := dropUnobserved(ops)
	fmt.Fprintf(os.Stderr, "lincheck: %d operations checked (%d unknown writes never observed, dropped) %v\n",
		len(ops), dropped, summary)

	model := kvModel.ToModel()
	result, info := porcupine.CheckOperationsVerbose(model, ops, *timeout)
	if *html != "" && result != porcupine.Ok {
		if err := porcupine.VisualizePath(model, info, *html); err != nil {
			fmt.Fprintln(os.Stderr, "lincheck: visualization:", err)
		}
	}
	switch result {
	case porcupine.Ok:
		fmt.Println("linearizable")
	case porcupine.Illegal:
		fmt.Println("NOT linearizable")
		os.Exit(1)
	default:
		fmt.Println("unknown: checker timed out")
		os.Exit(2)
	}
}
