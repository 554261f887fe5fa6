package main

import (
	"github.com/cosi-project/runtime/api/v1alpha1"
	"google.golang.org/protobuf/proto"
)

// kindRename moves one kind of the caller's to another on the server, and back in every answer.
//
// COSI's conformance suite writes `os/path` resources in namespace `default`; Omni (and so the
// simulated Omni) lets an infra provider write only in its own namespace `infra-provider:<id>`, and
// there only types named `<Name>.<id>.infraprovider.sidero.dev`. The rename makes the suite's
// resources ones that a provider may own, without changing anything else about them.
type kindRename struct {
	FromNamespace, ToNamespace string
	FromType, ToType           string
}

// kind maps the caller's kind to the server's.
func (r *kindRename) kind(ns, typ string) (string, string) {
	if r == nil {
		return ns, typ
	}

	return swap(ns, r.FromNamespace, r.ToNamespace), swap(typ, r.FromType, r.ToType)
}

// kindBack maps the server's kind to the caller's.
func (r *kindRename) kindBack(ns, typ string) (string, string) {
	if r == nil {
		return ns, typ
	}

	return swap(ns, r.ToNamespace, r.FromNamespace), swap(typ, r.ToType, r.FromType)
}

func swap(v, from, to string) string {
	if v == from {
		return to
	}

	return v
}

func (r *kindRename) get(in *v1alpha1.GetRequest) *v1alpha1.GetRequest {
	in = proto.CloneOf(in)
	in.Namespace, in.Type = r.kind(in.Namespace, in.Type)

	return in
}

func (r *kindRename) list(in *v1alpha1.ListRequest) *v1alpha1.ListRequest {
	in = proto.CloneOf(in)
	in.Namespace, in.Type = r.kind(in.Namespace, in.Type)

	return in
}

// out renames a resource being sent, in place (the caller passes a copy).
func (r *kindRename) out(res *v1alpha1.Resource) {
	if md := res.GetMetadata(); md != nil {
		md.Namespace, md.Type = r.kind(md.Namespace, md.Type)
	}
}

// back renames a received resource, in place.
func (r *kindRename) back(res *v1alpha1.Resource) {
	if md := res.GetMetadata(); md != nil {
		md.Namespace, md.Type = r.kindBack(md.Namespace, md.Type)
	}
}
