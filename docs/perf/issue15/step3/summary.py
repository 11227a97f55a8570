# Medians per (link, size, variant) of the runs run.sh wrote, as the table in docs/performance.md.
import json, glob, os, re, statistics, collections, sys
link = {'1gbit': 0.125, '400mbit': 0.05, '200mbit': 0.025}
res = collections.defaultdict(list)
for f in sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), '*.json'))):
    m = re.match(r'.*/(before|after-bbr|after-32k|after|fix)-(.*)-(\d+)\.json', f)
    if not m: continue
    var, rate, i = m.groups()
    j = json.load(open(f))
    rows = {(r['algo'], r['bytes']): r for r in j['rows'] if r.get('present')}
    for b in sorted({k[1] for k in rows}):
        rs = rows.get(('rs', b)); g = rows.get(('gloo_ring', b)); ri = rows.get(('ring', b))
        if not rs: continue
        l = link['200mbit' if '8x200' in rate else rate]
        res[(rate, b, var)].append(dict(bw=rs['algbw_gbs'], link=rs['algbw_gbs']/l, g=rs['algbw_gbs']/g['algbw_gbs'], r=rs['algbw_gbs']/ri['algbw_gbs'],
                                         w=rs['worker_cpu_s_per_gib'], rc=rs['reducer_cpu_s_per_gib'], gw=g['worker_cpu_s_per_gib']))
order = ['before', 'after-bbr', 'after-32k', 'after', 'fix']
print("| link | size | variant | rs GB/s | of the link | rs/Gloo (runs) | rs/ring | wcpu | rcpu | Gloo wcpu |")
print("|---|---|---|---|---|---|---|---|---|---|")
for key in sorted({(k[0], k[1]) for k in res}, key=lambda x: (x[0], x[1])):
    for v in order:
        runs = res.get((key[0], key[1], v))
        if not runs: continue
        med = lambda f: statistics.median(x[f] for x in runs)
        print(f"| {key[0]} | {key[1]>>20} MiB | {v} | {med('bw'):.3f} | {100*med('link'):.0f}% | **{med('g'):.2f}** ({', '.join('%.2f' % x['g'] for x in runs)}) | {med('r'):.2f} | {med('w'):.2f} | {med('rc'):.2f} | {med('gw'):.2f} |")
