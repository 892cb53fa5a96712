// Package k8s holds chatguard's Kubernetes deployment (base/, overlays/,
// components/), the IAM policies its IRSA roles carry (iam/), and the tests
// that hold them to the binaries: every overlay is rendered in-process,
// decoded strictly and checked against the flags, routes, metrics and image
// the code actually has. See deploy/README.md for the operator's view.
//
// It is a module of its own (github.com/chatguard/chatguard/deploy/k8s) so
// that the product's go.mod needs none of Kustomize, the Kubernetes API
// types, Prometheus or go-containerregistry. The image builder is package
// image; the readers of flags, routes and metrics are package inventory.
package k8s
