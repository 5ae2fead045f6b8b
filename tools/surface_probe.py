# WIP probe (issue 17): python tools/surface_probe.py SCALES MU, e.g. 0.2,0.06,0.02 0.1: fit the bunny, mesh unfiltered, print the components and f on the points.
# WIP probe (issue 17): fit the bunny, mesh without the component filter, print the components and f on the points.
import numpy as np, time, pickle
from streamcvm import surface
from streamcvm.meshio import read_points, chamfer, write_mesh, render_png
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components
from scipy.spatial import cKDTree
P = read_points('/work/shared/data/raw/bunny/bun_zipper.ply')
diag = np.linalg.norm(P.max(0)-P.min(0))
raw = {}
def keep_all(V, faces, points, tol):
    raw['V'], raw['F'], raw['tol'] = V, faces, tol
    return V, faces
surface.near_components = keep_all
import sys; sc=tuple(float(v) for v in sys.argv[1].split(',')); m = surface.fit(P, eps=1e-6, scales=sc, mu=float(sys.argv[2]), log=print)
V,F = surface.mesh(m, P, grid=128, n_jobs=2)
n=len(V); e=np.concatenate([F[:,[0,1]],F[:,[1,2]]])
k,lab=connected_components(sp.coo_matrix((np.ones(len(e)),(e[:,0],e[:,1])),shape=(n,n)),directed=False)
dist=cKDTree(P).query(V)[0]
sizes=np.bincount(lab)
for c in np.argsort(-sizes)[:8]:
    sel=lab==c; print(c, sizes[c], np.median(dist[sel])/diag, dist[sel].max()/diag)
print('tol/diag', raw['tol']/diag, 'components', k)
np.save('/tmp/bV.npy',V); np.save('/tmp/bF.npy',F)
fP = m.f(P); print('f on points: pct', np.percentile(fP,[0,1,5,50,95,99,100]))
