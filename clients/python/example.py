#!/usr/bin/env python3
"""Calls a Cohort group from Python: attach, show the view, invoke in a mode, print replies.

    clients/python/generate.sh && PYTHONPATH=clients/python/gen:clients/python \
        python3 clients/python/example.py --address 127.0.0.1:7201 --group counter \
        --method add --payload 5 --mode majority
"""
import argparse

from cohort_client import CohortClient


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--address", default="127.0.0.1:7201")
    parser.add_argument("--group", default="counter")
    parser.add_argument("--method", default="get")
    parser.add_argument("--payload", default="")
    parser.add_argument("--mode", default="all",
                        choices=["default", "one_way", "first", "majority", "all"])
    args = parser.parse_args()
    client = CohortClient(args.address, "python-example")
    view = client.group_details(args.group)
    print("attached to %s as NSO %d; group %s view %d: %s" % (
        client.node_name, client.nso, view.group, view.view_id,
        ", ".join(m.name + (" (suspected)" if m.suspected else "") for m in view.members)))
    reply = client.invoke(args.group, args.method, args.payload.encode(), mode=args.mode)
    print("%d of %d wanted replies" % (len(reply.replies), reply.wanted))
    for r in reply.replies:
        print("  %s: %s" % (r.member, r.payload.decode(errors="replace") if not r.status_code
                            else "error %d %s" % (r.status_code, r.error)))
    client.close()


if __name__ == "__main__":
    main()
