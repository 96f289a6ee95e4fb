/* SPDX-License-Identifier: MIT */
/*
 * stack_records.h - PROVISIONAL (branch symbolize): the record numbers and
 * field indexes of the call-stack contract (object 18, mapping 19, stack 20),
 * until branch stacks adds them to MT_RECORD_TYPES in event.h.
 */
#ifndef MEMTRACK_STACK_RECORDS_H
#define MEMTRACK_STACK_RECORDS_H

enum { MT_OBJECT = 18, MT_MAPPING = 19, MT_STACK = 20 };
enum { OBJECT_ID };
enum { MAPPING_START, MAPPING_END, MAPPING_OFFSET, MAPPING_OBJECT, MAPPING_BIAS };
enum { STACK_ID };

#endif /* MEMTRACK_STACK_RECORDS_H */
