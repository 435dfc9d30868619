// The extender protocol's floor, for the plain scale shape (`python -m bench ... --e2e-floor`): an
// extender in kube-scheduler's own language that does no work of its own. filter answers the first
// node it is asked about; bind posts the Binding as kube-scheduler's default binder does (client-go,
// protobuf). No decision, no watch, no placement record: what kube-scheduler, kube-apiserver and etcd
// pay for a pod when an extender filters and binds it, and the least any extender can cost.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"log"
	"net/http"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "")
	addr := flag.String("addr", "127.0.0.1:8888", "")
	flag.Parse()
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Fatal(err)
	}
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.QPS, cfg.Burst = 1000, 1000
	client := kubernetes.NewForConfigOrDie(cfg)
	http.HandleFunc("/filter", func(w http.ResponseWriter, r *http.Request) {
		var args extenderv1.ExtenderArgs
		if err := json.NewDecoder(r.Body).Decode(&args); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		result := extenderv1.ExtenderFilterResult{}
		if args.NodeNames != nil && len(*args.NodeNames) > 0 {
			names := []string{(*args.NodeNames)[0]}
			result.NodeNames = &names
		}
		json.NewEncoder(w).Encode(&result)
	})
	http.HandleFunc("/bind", func(w http.ResponseWriter, r *http.Request) {
		var args extenderv1.ExtenderBindingArgs
		if err := json.NewDecoder(r.Body).Decode(&args); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		binding := &v1.Binding{
			ObjectMeta: metav1.ObjectMeta{Namespace: args.PodNamespace, Name: args.PodName, UID: types.UID(args.PodUID)},
			Target:     v1.ObjectReference{Kind: "Node", Name: args.Node},
		}
		result := extenderv1.ExtenderBindingResult{}
		if err := client.CoreV1().Pods(args.PodNamespace).Bind(context.Background(), binding, metav1.CreateOptions{}); err != nil {
			result.Error = err.Error()
		}
		json.NewEncoder(w).Encode(&result)
	})
	http.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("floor\n")) })
	log.Fatal(http.ListenAndServe(*addr, nil))
}
