/**
 * The front end's ops: each builds device-independent jobs (src/contract/) and hands them to the
 * backend of its operands' device. Ops may import the Tensor class, the runtime, the contract, the
 * IR, the plans' types and core; never a device module (src/gpu/, src/wasm/). This module gives
 * the Tensor methods their op modules.
 * @module
 */
import { installTensorOps } from "../tensor.ts";
import * as ew from "./elementwise.ts";
import * as act from "./activations.ts";
import * as red from "./reduce.ts";
import * as pool from "./pool.ts";
import * as norm from "./rows.ts";
import * as scan from "./scan.ts";
import * as sort from "./sort.ts";
import * as idx from "./indexing.ts";
import * as mm from "./matmul.ts";
import * as sh from "./shape.ts";
import * as read from "./read.ts";

installTensorOps({ ew, act, red, pool, norm, scan, sort, idx, mm, sh, read });
