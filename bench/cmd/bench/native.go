package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// nativeMain is the baseline the host is measured against: a plain
// client-go dynamic shared informer on ConfigMaps in one namespace, with
// one handler, in a process of its own (so its CPU and memory are its own).
// With -mode record the handler does what the benchmark plugins do: it
// notes when it was entered and reads two fields. With -mode noop it
// does nothing (the memory benchmark's plain informer). It keeps
// managedFields, as client-go does, unless -strip-managed-fields.
//
// It talks to the harness over stdin and stdout, one line each way:
//
//	(it prints)  ready            the informer has synced
//	count        count N          events handled so far
//	dump PATH    dumped           records written to PATH, one per line
//	gc           gc C P A M       GC cycles, pause ns, bytes and objects allocated so far
//	exit                          it exits (so does EOF on stdin)
func nativeMain(args []string) int {
	fs := flag.NewFlagSet("native", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the control plane")
	ns := fs.String("namespace", "", "namespace to watch")
	mode := fs.String("mode", "record", "record or noop")
	fields := fs.String("fields", "metadata.labels.app,data.seq", "the two fields record mode reads (dotted, no brackets)")
	handlers := fs.Int("handlers", 1, "handlers to register (record mode: the first records, the others only read the two fields)")
	strip := fs.Bool("strip-managed-fields", false, "drop metadata.managedFields before objects enter the cache, as the daemon does by default")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file (the daemon's --cpu-profile, for the same comparison)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "native: -cpuprofile:", err)
			return 1
		}
		defer func() {
			pprof.StopCPUProfile()
			if err := f.Close(); err != nil {
				fmt.Fprintln(os.Stderr, "native: -cpuprofile:", err)
			}
		}()
	}
	paths := splitPaths(*fields)
	var (
		count atomic.Int64
		mu    sync.Mutex
		recs  []record
	)
	note := func(t byte, u *unstructured.Unstructured) {
		entered := time.Now()
		var v string
		for _, p := range paths {
			v, _, _ = unstructured.NestedString(u.Object, p...)
		}
		mu.Lock()
		recs = append(recs, record{typ: t, name: u.GetName(), value: v, entered: entered.UnixNano()})
		mu.Unlock()
		count.Add(1)
	}
	var h cache.ResourceEventHandler
	if *mode == "noop" {
		h = cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { count.Add(1) },
			UpdateFunc: func(any, any) { count.Add(1) },
			DeleteFunc: func(any) { count.Add(1) },
		}
	} else {
		h = cache.ResourceEventHandlerDetailedFuncs{
			AddFunc: func(obj any, initial bool) {
				if u, ok := obj.(*unstructured.Unstructured); ok {
					t := byte('a')
					if initial {
						t = 'A'
					}
					note(t, u)
				}
			},
			UpdateFunc: func(_, obj any) {
				if u, ok := obj.(*unstructured.Unstructured); ok {
					note('u', u)
				}
			},
			DeleteFunc: func(obj any) {
				if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = d.Obj
				}
				if u, ok := obj.(*unstructured.Unstructured); ok {
					note('d', u)
				}
			},
		}
	}
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, *ns, nil)
	inf := factory.ForResource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Informer()
	if *strip {
		// The daemon's transform (informer/watch.go), so that a memory
		// comparison holds the same objects on both sides.
		if err := inf.SetTransform(func(obj any) (any, error) {
			if u, ok := obj.(*unstructured.Unstructured); ok {
				u.SetManagedFields(nil)
			}
			return obj, nil
		}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	if _, err := inf.AddEventHandler(h); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// More handlers, as many listeners as the daemon has plugins: each
	// reads the two fields of every object, and records nothing.
	var sink atomic.Int64
	read := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if u, ok := obj.(*unstructured.Unstructured); ok {
			for _, p := range paths {
				v, _, _ := unstructured.NestedString(u.Object, p...)
				sink.Add(int64(len(v)))
			}
		}
	}
	for i := 1; i < *handlers; i++ {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: read, UpdateFunc: func(_, o any) { read(o) }, DeleteFunc: read,
		}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return 1
	}
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		cmd, arg, _ := strings.Cut(in.Text(), " ")
		switch cmd {
		case "count":
			fmt.Println("count", count.Load())
		case "dump":
			mu.Lock()
			err := writeRecords(arg, recs)
			mu.Unlock()
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			fmt.Println("dumped")
		case "gc":
			fmt.Println(ownGCStats().line())
		case "exit":
			return 0
		}
	}
	return 0
}

// record is one handler entry: its event type (a, A, u, d), the object's
// name, the value of the last field read, and when the handler was
// entered (Unix ns).
type record struct {
	typ     byte
	name    string
	value   string
	entered int64
}

func (r record) key() string { return string(r.typ) + ":" + r.name + ":" + r.value }

func writeRecords(path string, recs []record) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	for _, r := range recs {
		fmt.Fprintf(w, "%c:%s:%s:%d\n", r.typ, r.name, r.value, r.entered)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func readRecords(r io.Reader, add func(record)) error {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		if rec, ok := parseRecord(s.Text()); ok {
			add(rec)
		}
	}
	return s.Err()
}

// parseRecord reads "t:name:value:ns" (the format of package rec and of
// writeRecords). Names cannot hold ':'; values (our own) hold none.
func parseRecord(s string) (record, bool) {
	if len(s) < 2 || s[1] != ':' {
		return record{}, false
	}
	name, rest, ok := strings.Cut(s[2:], ":")
	i := strings.LastIndexByte(rest, ':')
	if !ok || i < 0 {
		return record{}, false
	}
	ns, err := strconv.ParseInt(rest[i+1:], 10, 64)
	if err != nil {
		return record{}, false
	}
	return record{typ: s[0], name: name, value: rest[:i], entered: ns}, true
}

func splitPaths(s string) [][]string {
	var out [][]string
	for _, f := range strings.Split(s, ",") {
		out = append(out, strings.Split(f, "."))
	}
	return out
}
