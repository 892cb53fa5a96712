package k8s
