// What CUDA's own library reaches on the same GPU for the scans and sums that issue 3 sets targets
// for: CUB's DeviceScan::InclusiveSum and DeviceReduce::Sum on float32, against a vec4 copy kernel
// and cudaMemcpy moving the same bytes. It tells a target the hardware and the look-back algorithm
// cannot meet apart from one gyre's WGSL kernels miss. Build and run (on the GPU host):
//   nvcc -O3 -arch=sm_90 -o /tmp/scan_reference bench/cuda/scan_reference.cu && /tmp/scan_reference
// Each figure is the median of 30 calls, each timed alone by CUDA events, after 5 warm-up calls.
#include <cub/cub.cuh>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#define CHECK(call)                                                                   \
  do {                                                                                \
    cudaError_t status = (call);                                                      \
    if (status != cudaSuccess) {                                                      \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(status)); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

__global__ void copyVec4(const float4* in, float4* out, size_t count) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < count) out[i] = in[i];
}

__global__ void fillPattern(float* data, size_t count) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < count) data[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
}

template <typename Body>
static double medianMicroseconds(Body body) {
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < 5; i++) body();
  std::vector<float> times;
  for (int i = 0; i < 30; i++) {
    CHECK(cudaEventRecord(start));
    body();
    CHECK(cudaEventRecord(stop));
    CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms * 1000.0f);
  }
  std::sort(times.begin(), times.end());
  CHECK(cudaEventDestroy(start));
  CHECK(cudaEventDestroy(stop));
  return (times[14] + times[15]) / 2;
}

int main(int argc, char** argv) {
  // `profile`: three copies, scans and sums of each size and nothing else, for `ncu` to time each
  // kernel alone and read its launch shape.
  bool profile = argc > 1 && std::string(argv[1]) == "profile";
  cudaDeviceProp properties;
  CHECK(cudaGetDeviceProperties(&properties, 0));
  std::printf("device: %s, %d SMs, L2 %d MB\n", properties.name, properties.multiProcessorCount,
              properties.l2CacheSize >> 20);
  std::printf("| op | elements | median us | GB/s | of vec4 copy of same bytes | of memcpy |\n");
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  for (size_t count : {size_t(1) << 20, size_t(1) << 22, size_t(1) << 24, size_t(1) << 26}) {
    float *in, *out, *total;
    CHECK(cudaMalloc(&in, count * 4));
    CHECK(cudaMalloc(&out, count * 4));
    CHECK(cudaMalloc(&total, 4));
    fillPattern<<<(count + 255) / 256, 256>>>(in, count);
    size_t scanBytes = 0, reduceBytes = 0;
    CHECK(cub::DeviceScan::InclusiveSum(nullptr, scanBytes, in, out, (int)count));
    CHECK(cub::DeviceReduce::Sum(nullptr, reduceBytes, in, total, (int)count));
    void* scratch;
    CHECK(cudaMalloc(&scratch, std::max(scanBytes, reduceBytes)));
    if (profile) {
      // Copies and scans alternate, so `ncu --cache-control none` times each as the event loop
      // above finds it (the L2 holding whatever the previous call left).
      for (int i = 0; i < 3; i++) {
        copyVec4<<<(count / 4 + 255) / 256, 256>>>((const float4*)in, (float4*)out, count / 4);
        CHECK(cub::DeviceScan::InclusiveSum(scratch, scanBytes, in, out, (int)count));
        CHECK(cub::DeviceReduce::Sum(scratch, reduceBytes, in, total, (int)count));
      }
      CHECK(cudaDeviceSynchronize());
      CHECK(cudaFree(in));
      CHECK(cudaFree(out));
      CHECK(cudaFree(total));
      CHECK(cudaFree(scratch));
      continue;
    }
    double copy = medianMicroseconds([&] {
      copyVec4<<<(count / 4 + 255) / 256, 256>>>((const float4*)in, (float4*)out, count / 4);
    });
    double memcpy = medianMicroseconds([&] {
      CHECK(cudaMemcpyAsync(out, in, count * 4, cudaMemcpyDeviceToDevice));
    });
    double scan = medianMicroseconds([&] {
      CHECK(cub::DeviceScan::InclusiveSum(scratch, scanBytes, in, out, (int)count));
    });
    double sum = medianMicroseconds([&] {
      CHECK(cub::DeviceReduce::Sum(scratch, reduceBytes, in, total, (int)count));
    });
    // A copy of the bytes a sum moves: half the elements read, half written.
    double halfCopy = medianMicroseconds([&] {
      copyVec4<<<(count / 8 + 255) / 256, 256>>>((const float4*)in, (float4*)out, count / 8);
    });
    CHECK(cudaGetLastError());
    auto row = [&](const char* name, double us, double bytes, double sameCopy) {
      std::printf("| %s | %zu | %.1f | %.0f | %.0f%% | %.0f%% |\n", name, count, us, bytes / us / 1e3,
                  100 * sameCopy / us, 100 * memcpy / us);
    };
    row("vec4 copy", copy, 8.0 * count, copy);
    row("cudaMemcpy D2D", memcpy, 8.0 * count, copy);
    row("cub InclusiveSum f32", scan, 8.0 * count, std::min(copy, memcpy));
    std::printf("| cub Reduce::Sum f32 | %zu | %.1f | %.0f | %.0f%% (copy of %zu elements %.1f us) | |\n",
                count, sum, 4.0 * count / sum / 1e3, 100 * halfCopy / sum, count / 2, halfCopy);
    CHECK(cudaFree(in));
    CHECK(cudaFree(out));
    CHECK(cudaFree(total));
    CHECK(cudaFree(scratch));
  }
  return 0;
}
