import torch, time, sys, warnings
warnings.filterwarnings("ignore")
torch.manual_seed(0)
threads=int(sys.argv[1]); torch.set_num_threads(threads)
def bench(B,T,D,H,train,reps=15):
    lstm=torch.nn.LSTM(D,H,batch_first=True)
    x=torch.randn(B,T,D,requires_grad=train)
    def run(n):
        t=time.perf_counter()
        for _ in range(n):
            if train:
                y,_=lstm(x); y.sum().backward()
            else:
                with torch.no_grad(): lstm(x)
        return (time.perf_counter()-t)/n
    out=[]
    for enabled in (True, False, True, False):
        with torch.backends.mkldnn.flags(enabled=enabled):
            run(2); out.append(run(reps)*1000)
    return out
for name,(B,T,D,H) in {"classifier":(64,40,640,128),"classifier_pred":(256,40,640,128),"lm":(128,32,256,256),"lm_long":(64,64,256,256)}.items():
    for train in (True,False):
        r=bench(B,T,D,H,train)
        print(f"{threads}t {name:16s} {'train' if train else 'infer'}: mkldnn {min(r[0],r[2]):7.1f} ms  native {min(r[1],r[3]):7.1f} ms  ratio {min(r[0],r[2])/min(r[1],r[3]):.2f}")
