//! ListTurns: a session's stored transcript, a page at a time, bounded by
//! count and by encoded bytes. (WatchSession is `crate::watch`.)

use super::*;

impl InvestigationsService {
    pub(super) async fn do_list_turns(
        &self,
        request: Request<pb::ListTurnsRequest>,
    ) -> Result<Response<pb::ListTurnsResponse>, Status> {
        let caller = Caller::of(&request)?;
        let req = request.into_inner();
        let id = SessionId::parse(&req.session_id).map_err(ApiError::from)?;
        let after = AfterSeq::parse(req.after_seq).map_err(ApiError::from)?;
        let before = match req.before_seq {
            0 => None,
            b if b < 0 => {
                return Err(ApiError::InvalidArgument(format!(
                    "before_seq must not be negative (got {b})"
                ))
                .into());
            }
            _ if req.after_seq != 0 => {
                return Err(ApiError::InvalidArgument(
                    "set after_seq or before_seq, not both".into(),
                )
                .into());
            }
            b => Some(b),
        };
        self.session_of(&caller, id).await?;
        let limit = page_size(req.limit, DEFAULT_TURN_PAGE, MAX_TURN_PAGE) as usize;
        if let Some(before) = before {
            return self.list_turns_before(id, before, limit).await;
        }
        // Up to `limit` turns and `max_response_bytes` encoded, whichever
        // comes first, and always at least one turn when there is one:
        // `turn_within` shows a turn in less than a whole response.
        let max = self.api.max_response_bytes;
        let budget = max - LIST_TURNS_FIXED_BYTES;
        let (mut turns, mut used) = (Vec::new(), 0);
        let mut cursor = after;
        let (head, more) = loop {
            let want = (limit - turns.len()).min(TURN_READ_CHUNK as usize) as u32;
            let page = self
                .store
                .list_turns(id, cursor, want)
                .await
                .map_err(ApiError::from)?;
            let mut full = false;
            for turn in &page.turns {
                let wire = convert::turn_within(turn, max);
                let len = wire.encoded_len();
                let entry = 1 + prost::encoding::encoded_len_varint(len as u64) + len;
                if !turns.is_empty() && used + entry > budget {
                    full = true;
                    break;
                }
                used += entry;
                cursor = AfterSeq::after(turn.seq);
                turns.push(wire);
            }
            if full {
                break (page.head, true);
            }
            if !page.more || page.turns.is_empty() {
                break (page.head, false);
            }
            if turns.len() >= limit {
                break (page.head, true);
            }
        };
        let next_after_seq = match (more, turns.last()) {
            (true, Some(last)) => last.seq,
            _ => 0,
        };
        Ok(Response::new(pb::ListTurnsResponse {
            turns,
            next_after_seq,
            head_seq: head.map(|h| h.as_i64()).unwrap_or(0),
            next_before_seq: 0,
        }))
    }

    /// The page just before `before`, bounded as the forward page is but
    /// filled from its newer end: what is cut by count or bytes is the
    /// oldest part, which the next page back then starts from.
    async fn list_turns_before(
        &self,
        id: SessionId,
        before: i64,
        limit: usize,
    ) -> Result<Response<pb::ListTurnsResponse>, Status> {
        let max = self.api.max_response_bytes;
        let budget = max - LIST_TURNS_FIXED_BYTES;
        let (mut turns, mut used) = (Vec::new(), 0);
        let mut cursor = before;
        let (head, more) = loop {
            let want = (limit - turns.len()).min(TURN_READ_CHUNK as usize) as u32;
            let page = self
                .store
                .list_turns_before(id, cursor, want)
                .await
                .map_err(ApiError::from)?;
            let mut full = false;
            for turn in page.turns.iter().rev() {
                let wire = convert::turn_within(turn, max);
                let len = wire.encoded_len();
                let entry = 1 + prost::encoding::encoded_len_varint(len as u64) + len;
                if !turns.is_empty() && used + entry > budget {
                    full = true;
                    break;
                }
                used += entry;
                cursor = wire.seq;
                turns.push(wire);
            }
            if full {
                break (page.head, true);
            }
            if !page.more || page.turns.is_empty() {
                break (page.head, false);
            }
            if turns.len() >= limit {
                break (page.head, true);
            }
        };
        turns.reverse();
        let next_before_seq = match (more, turns.first()) {
            (true, Some(first)) => first.seq,
            _ => 0,
        };
        Ok(Response::new(pb::ListTurnsResponse {
            turns,
            next_after_seq: 0,
            head_seq: head.map(|h| h.as_i64()).unwrap_or(0),
            next_before_seq,
        }))
    }
}
