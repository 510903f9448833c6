"""Prints one line per journalled result of cgtune run folders:
   python3 bench/megatron/table.py RUN/journal.jsonl ..."""
import json,sys,glob
for f in sys.argv[1:]:
    print("==",f)
    for l in open(f):
        m=json.loads(l)
        r=m.get('result')
        if not r: continue
        c=r['candidate']
        print("%-5s %-22s w%d step %8.2f (p10-p90 %7.2f-%7.2f) eager %8.2f x%.3f %-9s graphs %2d cap %6.0f host %7.2f/%7.2f loss %s/%s wall %5.0f base %s peak %s graph %s %s %s" % (c['impl'][:5],",".join(c['scopes']) or ("-" if c['impl']=='none' else 'layer'),c['warmup'],r['step']['median_ms'],r['step'].get('p10_ms',0),r['step'].get('p90_ms',0),r['eager']['median_ms'],r['speedup'],r['source'],r['graphs'],r['capture_ms'],r.get('host_enqueue_ms',0),r.get('eager_host_enqueue_ms',0),
          ("%.5f"%r['loss']) if r.get('loss') is not None else None, ("%.5f"%r['eager_loss']) if r.get('eager_loss') is not None else None,r['wall_ms'],r['memory'].get('device_base_mib'),r['memory'].get('device_peak_mib'),r['memory'].get('graph_mib'),r.get('error_kind',''),(r.get('error') or '')[:160]))
        for n in r.get('notes') or []:
            if 'collectives: modelled, 0.0' in n: continue
            print("      note:", n[:220])
